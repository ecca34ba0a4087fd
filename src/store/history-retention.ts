import { parseAttempts } from '../domain/attempt-records.js';
import type { SqlExecutor } from './sql/executor.js';
import type { StoreContext } from './store-context.js';

/**
 * The history retention (docs/store.md, "History retention"): the audit trail (`order_events`)
 * and the notification records (`notify_deliveries`) of final orders whose last change is older
 * than `H2H_HISTORY_RETENTION_D` are deleted, a small batch per write transaction; the orders
 * rows stay, whole, for settlement and for the shop (GET /v1/orders/:ref answers as before).
 * Feed events leave by the feed's own, shorter retention (`ChangeFeed.prune`), from its oldest
 * end only, so the feed stays a run of consecutive events a cursor reads on from.
 */

/** The most rows one batch deletes, and the most orders it looks at: one short write transaction. */
export const DEFAULT_PRUNE_BATCH_ROWS = 500;

/** What one batch ({@link HistoryRetention.pruneBatch}) deleted. */
export interface PrunedBatch {
  /** Orders whose whole history is gone now (`history_pruned_at` set). */
  orders: number;
  orderEvents: number;
  deliveries: number;
  /** Whether more may be left: the batch stopped at its bound. */
  more: boolean;
}

/**
 * A final order (the upstream's final status, or a submission that ended without one), settled
 * (no poll due: a SUCCESS waiting for its serial is still open), with history recorded since its
 * last pruning, from the partial index `orders_history_prunable` (schema 28), whose condition the
 * query repeats word for word so both planners take it.
 */
const candidatesSql = (ex: SqlExecutor) => `
  SELECT id, partner_ref, shop_ref, attempts FROM orders ${ex.dialect.indexedBy('orders_history_prunable')}
  WHERE next_poll_at IS NULL AND (history_pruned_at IS NULL OR history_pruned_at <= updated_at)
    AND updated_at < @before
    AND (status IN ('SUCCESS', 'FAILED', 'REFUNDED') OR submission_state IN ('rejected', 'cancelled'))
    AND NOT EXISTS (SELECT 1 FROM notify_outbox WHERE notify_outbox.partner_ref = orders.shop_ref)
  ORDER BY updated_at LIMIT @limit ${ex.dialect.skipLocked}`;

interface Candidate {
  id: number;
  partner_ref: string;
  shop_ref: string;
  attempts: string | null;
}

/** Prunes the history of old final orders (`store.retention`). Never touches an open order. */
export class HistoryRetention {
  readonly #context: StoreContext;

  constructor(context: StoreContext) {
    this.#context = context;
  }

  /**
   * One write transaction: deletes at most `batchRows` rows (events and delivery records of final
   * orders last changed before `before`, ms, oldest change first, and delivery records of events
   * of no order requested before it) and marks each order whose history is all gone. An order
   * with more rows than the bound is finished by the next batches. On PostgreSQL an order another
   * transaction holds is skipped (`SKIP LOCKED`), so the batch never waits for a writer.
   */
  async pruneBatch(before: number, batchRows = DEFAULT_PRUNE_BATCH_ROWS): Promise<PrunedBatch> {
    if (!Number.isInteger(batchRows) || batchRows < 1) {
      throw new RangeError(`batchRows must be a whole number ≥ 1, got ${batchRows}`);
    }
    return this.#context.db.write(async (tx) => {
      const now = this.#context.now();
      const result: PrunedBatch = { orders: 0, orderEvents: 0, deliveries: 0, more: false };
      let budget = batchRows;
      const candidates = await tx.all<Candidate>(candidatesSql(tx), { before, limit: batchRows });
      for (const order of candidates) {
        // Every attempt's events, each under its own partner_ref (as OrderQueries.listEvents reads them).
        const refs = [...parseAttempts(order.attempts).map((a) => a.partner_ref), order.partner_ref];
        const events = await deleteSome(
          tx,
          'order_events',
          `partner_ref IN (${refs.map((_, i) => `@ref${i}`).join(', ')})`,
          Object.fromEntries(refs.map((ref, i) => [`ref${i}`, ref])),
          budget,
        );
        result.orderEvents += events;
        budget -= events;
        if (budget === 0) break;
        const deliveries = await deleteSome(
          tx,
          'notify_deliveries',
          'partner_ref = @shopRef',
          { shopRef: order.shop_ref },
          budget,
        );
        result.deliveries += deliveries;
        budget -= deliveries;
        // Rows may be left when the deletes took the whole budget: the next batch finishes it.
        if (budget === 0) break;
        await tx.run('UPDATE orders SET history_pruned_at = @now WHERE id = @id', { now, id: order.id });
        result.orders += 1;
      }
      if (budget > 0 && candidates.length < batchRows) {
        // Price changes and low balances are no order's: their records go by age alone (once the
        // orders are done, so the look through old records passes few of an order's).
        const others = await deleteSome(
          tx,
          'notify_deliveries',
          'partner_ref IS NULL AND requested_at < @before',
          { before },
          budget,
        );
        result.deliveries += others;
        budget -= others;
      }
      result.more = budget === 0 || candidates.length === batchRows;
      return result;
    });
  }
}

/** Deletes up to `limit` rows of `table` matching `where` (by `id`); returns how many. */
async function deleteSome(
  tx: SqlExecutor,
  table: 'order_events' | 'notify_deliveries',
  where: string,
  params: Record<string, unknown>,
  limit: number,
): Promise<number> {
  const { changes } = await tx.run(
    `DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE ${where} LIMIT @limit)`,
    { ...params, limit },
  );
  return changes;
}
