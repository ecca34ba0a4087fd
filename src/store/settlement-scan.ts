import type { SettlementOrderRow } from '../domain/settlement.js';
import type { SqlExecutor } from './sql/executor.js';

/**
 * The orders placed in a time range, for the settlement report (docs/settlement.md): read in
 * pages along the index `orders_local_created_at`, in its order, so a day of a store of millions
 * of orders reads that day's index entries and rows only, never the table, and never sorts
 * (ordering by the index's column alone, where a tie-breaker such as `id` would make PostgreSQL
 * sort the rest of the range for every page). A page ends before the millisecond of its last
 * row, and the next starts at that millisecond, so orders placed in the same millisecond are
 * never split between pages; a page all of one millisecond is that millisecond's every order.
 */

/** Rows per page. */
export const SETTLEMENT_PAGE_SIZE = 1000;

const COLUMNS = `shop_ref, partner_ref, upstream, product_code, status, submission_state, amount,
      debited_amount, attempts, request, invoice_number, local_created_at`;

// An order with ended attempts may have one on the upstream, whatever its current one's.
const upstreamCondition = (upstream: boolean) =>
  upstream ? '\n      AND (upstream = @upstream OR attempts IS NOT NULL)' : '';

/** A page's query: the first `@limit` orders of `[@lo, @to)`, in the index's order. */
export function settlementPageSql(upstream: boolean): string {
  return `SELECT ${COLUMNS}
    FROM orders
    WHERE local_created_at >= @lo AND local_created_at < @to${upstreamCondition(upstream)}
    ORDER BY local_created_at
    LIMIT @limit`;
}

/** Every order placed in the millisecond `@at`. */
function sameMillisecondSql(upstream: boolean): string {
  return `SELECT ${COLUMNS}
    FROM orders
    WHERE local_created_at = @at${upstreamCondition(upstream)}`;
}

/**
 * The orders placed from `from` (included) to `to` (excluded), ms since the epoch, by placement
 * time, in pages of about `pageSize`; with `upstream`, only those that may have an attempt on it
 * (the current attempt's, or any order with ended attempts: the caller picks its attempts).
 */
export async function* ordersPlaced(
  db: SqlExecutor,
  { from, to, upstream }: { from: number; to: number; upstream?: string },
  pageSize = SETTLEMENT_PAGE_SIZE,
): AsyncGenerator<SettlementOrderRow[]> {
  const filter = upstream === undefined ? {} : { upstream };
  const pageSql = settlementPageSql(upstream !== undefined);
  let lo = from;
  while (lo < to) {
    const rows = await db.all<SettlementOrderRow>(pageSql, { lo, to, limit: pageSize, ...filter });
    if (rows.length < pageSize) {
      if (rows.length > 0) yield rows;
      return;
    }
    const last = rows[rows.length - 1]!.local_created_at;
    if (rows[0]!.local_created_at === last) {
      yield await db.all<SettlementOrderRow>(sameMillisecondSql(upstream !== undefined), {
        at: last,
        ...filter,
      });
      lo = last + 1;
    } else {
      yield rows.filter((row) => row.local_created_at < last);
      lo = last;
    }
  }
}
