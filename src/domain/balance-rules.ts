import type { PublicBalance, PublicBalanceTotal, PublicUpstreamBalance } from '../catalog/public-catalog.js';
import type { OrderRow } from '../store/local-order.js';
import { isDefaultUpstream } from '../upstream/model.js';
import type { DriftState } from './drift-rules.js';

/**
 * The balance's accounting (docs/api.md, "Balance"), as pure functions: what an order write
 * debits or credits, the balance a ledger row stands for, the total over the upstreams, and when
 * `balance.low` is due. Each upstream has its own ledger row: an order's debits and credits are
 * its upstream's. The store's `BalanceLedger` (balance.ts) reads the ledger and prices and writes
 * what these say.
 */

/** Statuses whose amount decisions.md says is credited back. */
const CREDITED_STATUSES: ReadonlySet<string | null> = new Set(['FAILED', 'REFUNDED']);

/** The order fields the accounting reads. */
export type AccountedOrder = Pick<
  OrderRow,
  'submission_state' | 'status' | 'amount' | 'product_code' | 'product_id'
>;

/**
 * One upstream's ledger as stored (`balance_ledger`, a row per upstream, schema 24; the drift
 * it carries from read to read since schema 29: domain/drift-rules.ts).
 */
export interface LedgerRow extends DriftState {
  upstream: string;
  profile_balance: number;
  profile_read_at: number;
  debited: number;
  credited: number;
  unpriced: number;
  low_alerted: number;
  /** The refunds the audit owes the drift (drift-rules.ts, `audit_owed`), set at each read. */
  audit_owed: number;
  /** What REFUNDED orders were credited since the read: the refunds found towards `audit_owed`. */
  refunded: number;
}

/**
 * What a write `current` → `next` (current null: a new row) is to the accounting: a debit when
 * the upstream first accepts the order, a credit when it first becomes FAILED or REFUNDED.
 */
export function accountingOf(
  current: AccountedOrder | null,
  next: AccountedOrder,
): { accepted: boolean; credited: boolean } {
  return {
    accepted: next.submission_state === 'accepted' && current?.submission_state !== 'accepted',
    credited: CREDITED_STATUSES.has(next.status) && !CREDITED_STATUSES.has(current?.status ?? null),
  };
}

/**
 * The amounts to add to the ledger for an accounted write: a debit at `price` (the order's
 * `amount`, else its product's price; null when neither is known: counted as unpriced, not
 * debited), a credit of exactly `debited`, what the order's acceptance debited (null: nothing
 * was, so nothing is credited, whatever its price is now). When the same write accepts the order
 * and fails it, the credit is the debit of that write.
 */
export function ledgerEntry(
  { accepted, credited }: { accepted: boolean; credited: boolean },
  price: number | null,
  debited: number | null,
): { debit: number; credit: number; unpriced: number } {
  const debit = accepted && price !== null ? price : 0;
  const creditable = accepted ? debit : (debited ?? 0);
  return {
    debit,
    credit: credited ? creditable : 0,
    unpriced: accepted && price === null ? 1 : 0,
  };
}

/**
 * The public balance of `upstream`'s ledger row (undefined: no profile read yet); `lowThreshold`
 * 0 is none.
 */
export function balanceView(
  upstream: string,
  row: LedgerRow | undefined,
  lowThreshold: number,
): PublicUpstreamBalance {
  const low_threshold = lowThreshold === 0 ? null : lowThreshold;
  if (!row) return { upstream, ...NOTHING_READ, low_threshold };
  return {
    upstream,
    balance: row.profile_balance - row.debited + row.credited,
    profile_balance: row.profile_balance,
    profile_read_at: new Date(row.profile_read_at).toISOString(),
    debited: row.debited,
    credited: row.credited,
    unpriced_orders: row.unpriced,
    low_threshold,
  };
}

const NOTHING_READ = {
  balance: null,
  profile_balance: null,
  profile_read_at: null,
  debited: 0,
  credited: 0,
  unpriced_orders: 0,
} as const satisfies Omit<PublicBalance, 'low_threshold'>;

/**
 * The balance over every upstream (GET /v1/balance) from each one's `views`: the sums of their
 * figures, `profile_read_at` the oldest read, and each upstream's own, the default first and
 * then by name. With one upstream the figures are its own; with none read, all null as before
 * the first read.
 */
export function totalBalance(
  views: readonly PublicUpstreamBalance[],
  lowThreshold: number,
): PublicBalanceTotal {
  const low_threshold = lowThreshold === 0 ? null : lowThreshold;
  const rank = (view: PublicUpstreamBalance) => (isDefaultUpstream(view.upstream) ? '' : view.upstream);
  const upstreams = [...views].sort((a, b) => (rank(a) < rank(b) ? -1 : rank(a) > rank(b) ? 1 : 0));
  const read = upstreams.filter((view) => view.balance !== null);
  if (read.length === 0) return { ...NOTHING_READ, low_threshold, upstreams };
  const sum = (pick: (view: PublicUpstreamBalance) => number) =>
    read.reduce((total, view) => total + pick(view), 0);
  return {
    balance: sum((view) => view.balance!),
    profile_balance: sum((view) => view.profile_balance!),
    profile_read_at: read.map((view) => view.profile_read_at!).sort()[0]!,
    debited: sum((view) => view.debited),
    credited: sum((view) => view.credited),
    unpriced_orders: sum((view) => view.unpriced_orders),
    low_threshold,
    upstreams,
  };
}

/**
 * `balance.low` once per crossing: `alert` when the balance falls under the threshold (append the
 * event, remember it), `clear` when it is back over after an alert, else null. Never with a
 * threshold of 0.
 */
export function lowBalanceChange(
  balance: number,
  lowThreshold: number,
  alerted: boolean,
): 'alert' | 'clear' | null {
  if (lowThreshold === 0) return null;
  const below = balance < lowThreshold;
  if (below && !alerted) return 'alert';
  if (!below && alerted) return 'clear';
  return null;
}
