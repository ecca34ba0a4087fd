import type { SettlementOrderRow } from '../domain/settlement.js';
import type { SqlExecutor } from './sql/executor.js';

/**
 * The orders placed in a time range, for the settlement report (docs/settlement.md): read in
 * pages along the index `orders_local_created_at`, so a day of a store of millions of orders
 * reads that day's index entries and rows only, never the table. Each page continues after the
 * last row of the one before (its `local_created_at` and `id`); the few rows placed in the same
 * millisecond as that row are read again and skipped.
 */

/** Rows per page. */
export const SETTLEMENT_PAGE_SIZE = 1000;

/** The page's query: the range `[@lo, @to)` on the index, after (`@afterAt`, `@afterId`). */
export function settlementPageSql(upstream: boolean): string {
  return `SELECT id, shop_ref, partner_ref, upstream, product_code, status, submission_state, amount,
      debited_amount, attempts, request, invoice_number, local_created_at
    FROM orders
    WHERE local_created_at >= @lo AND local_created_at < @to
      AND (local_created_at > @afterAt OR id > @afterId)${
        // An order with ended attempts may have one on the upstream, whatever its current one's.
        upstream ? '\n      AND (upstream = @upstream OR attempts IS NOT NULL)' : ''
      }
    ORDER BY local_created_at, id
    LIMIT @limit`;
}

type PageRow = SettlementOrderRow & { id: number };

/**
 * The orders placed from `from` (included) to `to` (excluded), ms since the epoch, oldest first,
 * in pages of `pageSize`; with `upstream`, only those that may have an attempt on it (the current
 * attempt's, or any order with ended attempts: the caller picks its attempts).
 */
export async function* ordersPlaced(
  db: SqlExecutor,
  { from, to, upstream }: { from: number; to: number; upstream?: string },
  pageSize = SETTLEMENT_PAGE_SIZE,
): AsyncGenerator<SettlementOrderRow[]> {
  const sql = settlementPageSql(upstream !== undefined);
  let after = { at: from - 1, id: 0 };
  for (;;) {
    const rows = await db.all<PageRow>(sql, {
      lo: Math.max(from, after.at),
      to,
      afterAt: after.at,
      afterId: after.id,
      limit: pageSize,
      ...(upstream === undefined ? {} : { upstream }),
    });
    if (rows.length === 0) return;
    yield rows;
    if (rows.length < pageSize) return;
    const last = rows[rows.length - 1]!;
    after = { at: last.local_created_at, id: last.id };
  }
}
