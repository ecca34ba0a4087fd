import type { ProductPriceChange, PublicBalance, PublicBalanceDrift } from '../catalog/public-catalog.js';
import { ORDER_EVENT_TYPES, type OrderEventType } from '../domain/feed-change.js';
import type { PublicOrder } from '../domain/public-order.js';
import type { SqlExecutor } from './sql/executor.js';
import type { StoreContext } from './store-context.js';

export { ORDER_EVENT_TYPES, type OrderEventType };

/**
 * The change feed (docs/api.md, "The change feed"): every change of every order, and the price
 * changes and low balances found, in one total order, written by the order writer (the catalog
 * sync, the balance ledger) in the same transaction as the change it describes (a
 * transactional outbox), so no reader ever sees a change without its event or an event without
 * its change, and a crash between the two is impossible. The shop's notifications are delivered
 * from here; the shop reads it from its last cursor to catch up.
 *
 * `seq` is strictly increasing and never reused, even after the oldest events are pruned: SQLite's
 * AUTOINCREMENT rowid, or on PostgreSQL a counter row updated under the feed lock that every
 * appending transaction holds (so a rolled-back append leaves no hole). One appender commits at a
 * time, so a reader never sees seq n + 1 before seq n.
 */

/**
 * Every event type of the feed (decisions.md): the order events, a price change, a low balance,
 * a balance drift.
 */
export const FEED_EVENT_TYPES = [
  ...ORDER_EVENT_TYPES,
  'product.price_changed',
  'balance.low',
  'balance.drift',
] as const;
export type FeedEventType = (typeof FEED_EVENT_TYPES)[number];

/** What each event type carries in `data`. */
export interface FeedEventData {
  'order.submitted': PublicOrder;
  'order.updated': PublicOrder;
  'order.rejected': PublicOrder;
  'order.blocked': PublicOrder;
  'order.cancelled': PublicOrder;
  /** The product after the catalog sync that found the change, with `previous_price`. */
  'product.price_changed': ProductPriceChange;
  /** The balance as it was when it fell under BALANCE_LOW_THRESHOLD. */
  'balance.low': PublicBalance;
  /** The upstream's drift at the second profile read in a row past BALANCE_DRIFT_THRESHOLD. */
  'balance.drift': PublicBalanceDrift;
}

/**
 * What an event of type `T` carries beside `data`: an order event, `previous_status`, the order's
 * public `status` just before the change, recorded in the change's transaction (null when it had
 * none, and in every event written before schema version 18); the others, nothing.
 */
export type PreviousStatus<T extends FeedEventType> = T extends OrderEventType
  ? { previous_status: PublicOrder['status'] }
  : unknown;

/** One event of the feed, as readers get it; `type` tells what `data` is. */
export type FeedEvent = {
  [T in FeedEventType]: {
    /** The cursor: read on with `after = seq`. */
    seq: number;
    type: T;
    /** When the change was committed, ISO 8601 UTC. */
    timestamp: string;
    /**
     * An order event: the order's whole public representation after the change, with its
     * `version`. The others: see {@link FeedEventData}.
     */
    data: FeedEventData[T];
  } & PreviousStatus<T>;
}[FeedEventType];

/** The order an event is about (its partner_ref), or undefined for an event of no order. */
export function orderRefOf(event: FeedEvent): string | undefined {
  return isOrderEvent(event) ? event.data.partner_ref : undefined;
}

/** Whether the event is one of an order ({@link ORDER_EVENT_TYPES}). */
export function isOrderEvent(event: FeedEvent): event is Extract<FeedEvent, { type: OrderEventType }> {
  return (ORDER_EVENT_TYPES as readonly string[]).includes(event.type);
}

export interface FeedRow {
  seq: number;
  type: FeedEventType;
  partner_ref: string | null;
  version: number | null;
  timestamp: number;
  data: string;
  previous_status: PublicOrder['status'];
}

export function toFeedEvent(row: FeedRow): FeedEvent {
  return {
    seq: row.seq,
    type: row.type,
    timestamp: new Date(row.timestamp).toISOString(),
    ...((ORDER_EVENT_TYPES as readonly string[]).includes(row.type)
      ? { previous_status: row.previous_status }
      : {}),
    data: JSON.parse(row.data),
  } as FeedEvent;
}

/** The most events one write transaction of {@link ChangeFeed.prune} deletes. */
export const DEFAULT_FEED_PRUNE_BATCH = 500;

/** The most events one read returns. */
export const MAX_FEED_PAGE = 1000;

const INSERT = `INSERT INTO feed_events (type, partner_ref, version, timestamp, data, previous_status)
  VALUES (@type, @partner_ref, @version, @timestamp, @data, @previous_status)`;

export class ChangeFeed {
  readonly #context: StoreContext;

  constructor(context: StoreContext) {
    this.#context = context;
  }

  /**
   * Appends the event of a change: `order` is the order's public representation after it, at its
   * new `version`, and `previousStatus` its `status` before it, as the transaction `tx` of the
   * change read the order. Only the order writer calls it, inside that transaction.
   */
  async append(
    tx: SqlExecutor,
    type: OrderEventType,
    order: PublicOrder,
    previousStatus: PublicOrder['status'],
    now: number,
  ): Promise<void> {
    await tx.run(INSERT, {
      type,
      partner_ref: order.partner_ref,
      version: order.version,
      timestamp: now,
      data: JSON.stringify(order),
      previous_status: previousStatus,
    });
  }

  /**
   * Appends an event of no order (a price change, a low balance), inside the transaction `tx` of
   * the write that found it: the catalog sync or the balance ledger.
   */
  async appendOther<T extends Exclude<FeedEventType, OrderEventType>>(
    tx: SqlExecutor,
    type: T,
    data: FeedEventData[T],
    now: number,
  ): Promise<void> {
    await tx.run(INSERT, {
      type,
      partner_ref: null,
      version: null,
      timestamp: now,
      data: JSON.stringify(data),
      previous_status: null,
    });
  }

  /** Up to `limit` events after cursor `after` (0: from the oldest kept), oldest first. */
  async after(after: number, limit = 100): Promise<FeedEvent[]> {
    if (!Number.isInteger(after) || after < 0)
      throw new RangeError(`after must be a whole number ≥ 0, got ${after}`);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_FEED_PAGE) {
      throw new RangeError(`limit must be a whole number from 1 to ${MAX_FEED_PAGE}, got ${limit}`);
    }
    const rows = await this.#context.db.all<FeedRow>(
      'SELECT * FROM feed_events WHERE seq > @after ORDER BY seq LIMIT @limit',
      { after, limit },
    );
    return rows.map(toFeedEvent);
  }

  /** The event `seq`, or undefined when there is none (never written, or pruned). */
  async get(seq: number): Promise<FeedEvent | undefined> {
    const row = await this.#context.db.get<FeedRow>('SELECT * FROM feed_events WHERE seq = @seq', { seq });
    return row ? toFeedEvent(row) : undefined;
  }

  /** The seq and type of the events of one order with `after < seq < before`, oldest first. */
  ofOrder(
    partnerRef: string,
    { after = 0, before = Number.MAX_SAFE_INTEGER } = {},
  ): Promise<Array<{ seq: number; type: FeedEventType }>> {
    return this.#context.db.all(
      `SELECT seq, type FROM feed_events
       WHERE partner_ref = @partnerRef AND seq > @after AND seq < @before ORDER BY seq`,
      { partnerRef, after, before },
    );
  }

  /** Up to `limit` events committed at or after `since` (ms) with seq above `after`, oldest first. */
  async since(since: number, after = 0, limit = 100): Promise<FeedEvent[]> {
    const rows = await this.#context.db.all<FeedRow>(
      'SELECT * FROM feed_events WHERE timestamp >= @since AND seq > @after ORDER BY seq LIMIT @limit',
      { since, after, limit },
    );
    return rows.map(toFeedEvent);
  }

  /** The cursor of the newest event (0 when there is none): where a reader of new events starts. */
  async lastSeq(): Promise<number> {
    return (
      (await this.#context.db.get<{ seq: number | null }>('SELECT MAX(seq) AS seq FROM feed_events'))?.seq ??
      0
    );
  }

  /**
   * Calls `onCommit` soon after events are committed (StoreDb.watchFeed): at once for this
   * process's on SQLite, for every process's on PostgreSQL. A reader (the
   * notifier) reads then instead of waiting for its tick, and keeps the tick for what this
   * cannot reach. Resolves to a function that stops it.
   */
  watch(onCommit: () => void): Promise<() => Promise<void>> {
    return this.#context.db.watchFeed(onCommit);
  }

  /**
   * Deletes the events older than `retentionMs`, at most `batchRows` (default 500) per write
   * transaction, oldest first, so the feed only ever loses its oldest end; returns how many.
   */
  async prune(
    retentionMs: number,
    { batchRows = DEFAULT_FEED_PRUNE_BATCH }: { batchRows?: number } = {},
  ): Promise<number> {
    const before = this.#context.now() - retentionMs;
    let pruned = 0;
    for (;;) {
      const changes = await this.pruneBatch(before, batchRows);
      pruned += changes;
      if (changes < batchRows) return pruned;
    }
  }

  /** One write transaction of {@link prune}: up to `limit` of the events committed before `before` (ms). */
  async pruneBatch(before: number, limit: number): Promise<number> {
    if (!Number.isInteger(limit) || limit < 1)
      throw new RangeError(`limit must be a whole number ≥ 1, got ${limit}`);
    const { changes } = await this.#context.db.run(
      `DELETE FROM feed_events WHERE seq IN (
         SELECT seq FROM feed_events WHERE timestamp < @before ORDER BY timestamp LIMIT @limit)`,
      { before, limit },
    );
    return changes;
  }
}
