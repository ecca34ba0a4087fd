import type { Statement } from 'better-sqlite3';
import type { PublicBalance } from '../catalog/public-catalog.js';
import type { ChangeFeed } from './feed.js';
import type { OrderRow } from './local-order.js';
import type { OrderRows } from './order-rows.js';

/**
 * The balance without spending budget (docs/api.md, "Balance"): the `member_balance` of the last
 * GET /profile (read by the catalog sync), minus the price of every order the upstream accepted
 * since, plus the amount of every order that became FAILED or REFUNDED since, as decisions.md
 * says the upstream debits and credits. The order writer calls {@link BalanceLedger.afterOrderWrite}
 * in the transaction of each order write, so the accounting never misses or repeats an order;
 * `balance.low` is appended in that same transaction, once each time the balance falls under
 * the threshold.
 */

interface LedgerRow {
  profile_balance: number;
  profile_read_at: number;
  debited: number;
  credited: number;
  unpriced: number;
  low_alerted: number;
}

/** Statuses whose amount decisions.md says is credited back. */
const CREDITED_STATUSES: ReadonlySet<string | null> = new Set(['FAILED', 'REFUNDED']);

/** The order fields the accounting reads. */
type AccountedOrder = Pick<
  OrderRow,
  'submission_state' | 'status' | 'amount' | 'product_code' | 'product_id'
>;

export class BalanceLedger {
  readonly #rows: OrderRows;
  readonly #feed: ChangeFeed;
  /** BALANCE_LOW_THRESHOLD; 0 = no `balance.low`. */
  readonly lowThreshold: number;
  readonly #get: Statement<[], LedgerRow>;
  readonly #reset: Statement<{ balance: number; readAt: number }>;
  readonly #account: Statement<{ debit: number; credit: number; unpriced: number }>;
  readonly #setAlerted: Statement<[number]>;
  readonly #price: Statement<[string | null, string | null], { price: number }>;

  constructor(rows: OrderRows, feed: ChangeFeed, lowThreshold = 0) {
    if (!(Number.isFinite(lowThreshold) && lowThreshold >= 0)) {
      throw new RangeError(`the low balance threshold must be a number ≥ 0, got ${lowThreshold}`);
    }
    this.#rows = rows;
    this.#feed = feed;
    this.lowThreshold = lowThreshold;
    const { db } = rows;
    this.#get = db.prepare('SELECT * FROM balance_ledger WHERE id = 1');
    this.#reset = db.prepare(
      `INSERT INTO balance_ledger (id, profile_balance, profile_read_at, debited, credited, unpriced)
       VALUES (1, @balance, @readAt, 0, 0, 0)
       ON CONFLICT (id) DO UPDATE SET profile_balance = @balance, profile_read_at = @readAt,
         debited = 0, credited = 0, unpriced = 0`,
    );
    this.#account = db.prepare(
      `UPDATE balance_ledger SET debited = debited + @debit, credited = credited + @credit,
         unpriced = unpriced + @unpriced WHERE id = 1`,
    );
    this.#setAlerted = db.prepare('UPDATE balance_ledger SET low_alerted = ? WHERE id = 1');
    this.#price = db.prepare(
      `SELECT price FROM catalog_products WHERE code = ?
       UNION ALL SELECT price FROM catalog_products WHERE id = ? LIMIT 1`,
    );
  }

  /** The balance now (all null before the first profile read). */
  view(): PublicBalance {
    return this.#toPublic(this.#get.get());
  }

  /**
   * Starts the accounting again from a profile read: `balance` as the upstream said at `readAt`.
   * Only inside a write transaction (the catalog sync's).
   */
  refreshInTx(balance: number, readAt: number): void {
    this.#reset.run({ balance, readAt });
    this.#checkLow();
  }

  /**
   * The accounting of one order write, `current` → `next` (current null: a new row), inside the
   * order writer's transaction: a debit when the upstream first accepts the order, a credit when
   * it first becomes FAILED or REFUNDED. Its price is the order's `amount` (what the upstream
   * debited), else the product's price in the local catalog; an order of neither is counted in
   * `unpriced_orders`. Nothing before the first profile read.
   */
  afterOrderWrite(current: AccountedOrder | null, next: AccountedOrder): void {
    const accepted = next.submission_state === 'accepted' && current?.submission_state !== 'accepted';
    const credited = CREDITED_STATUSES.has(next.status) && !CREDITED_STATUSES.has(current?.status ?? null);
    if (!accepted && !credited) return;
    if (!this.#get.get()) return;
    const price = next.amount ?? this.#price.get(next.product_code, next.product_id)?.price ?? null;
    this.#account.run({
      debit: accepted && price !== null ? price : 0,
      credit: credited && price !== null ? price : 0,
      unpriced: accepted && price === null ? 1 : 0,
    });
    this.#checkLow();
  }

  /** `balance.low` once per crossing: when the balance falls under the threshold, not again until it is back over. */
  #checkLow(): void {
    if (this.lowThreshold === 0) return;
    const row = this.#get.get();
    if (!row) return;
    const view = this.#toPublic(row);
    const below = view.balance! < this.lowThreshold;
    if (below && row.low_alerted === 0) {
      this.#setAlerted.run(1);
      this.#feed.appendOther('balance.low', view, this.#rows.now());
    } else if (!below && row.low_alerted === 1) {
      this.#setAlerted.run(0);
    }
  }

  #toPublic(row: LedgerRow | undefined): PublicBalance {
    const low_threshold = this.lowThreshold === 0 ? null : this.lowThreshold;
    if (!row) {
      return {
        balance: null,
        profile_balance: null,
        profile_read_at: null,
        debited: 0,
        credited: 0,
        unpriced_orders: 0,
        low_threshold,
      };
    }
    return {
      balance: row.profile_balance - row.debited + row.credited,
      profile_balance: row.profile_balance,
      profile_read_at: new Date(row.profile_read_at).toISOString(),
      debited: row.debited,
      credited: row.credited,
      unpriced_orders: row.unpriced,
      low_threshold,
    };
  }
}
