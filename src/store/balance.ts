import type { Statement } from 'better-sqlite3';
import type { PublicBalance } from '../catalog/public-catalog.js';
import type { ChangeFeed } from './feed.js';
import type { OrderRows } from './order-rows.js';
import {
  type AccountedOrder,
  accountingOf,
  balanceView,
  type LedgerRow,
  ledgerEntry,
  lowBalanceChange,
} from './rules/balance-rules.js';

/**
 * The balance without spending budget (docs/api.md, "Balance"): the `member_balance` of the last
 * GET /profile (read by the catalog sync), minus the price of every order the upstream accepted
 * since, plus the amount of every order that became FAILED or REFUNDED since, as decisions.md
 * says the upstream debits and credits. The order writer calls {@link BalanceLedger.afterOrderWrite}
 * in the transaction of each order write, so the accounting never misses or repeats an order;
 * `balance.low` is appended in that same transaction, once each time the balance falls under
 * the threshold. The accounting's rules are pure, in rules/balance-rules.ts.
 */
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
    const accounting = accountingOf(current, next);
    if (!accounting.accepted && !accounting.credited) return;
    if (!this.#get.get()) return;
    const price = next.amount ?? this.#price.get(next.product_code, next.product_id)?.price ?? null;
    this.#account.run(ledgerEntry(accounting, price));
    this.#checkLow();
  }

  /** `balance.low` once per crossing: when the balance falls under the threshold, not again until it is back over. */
  #checkLow(): void {
    if (this.lowThreshold === 0) return;
    const row = this.#get.get();
    if (!row) return;
    const view = this.#toPublic(row);
    const change = lowBalanceChange(view.balance!, this.lowThreshold, row.low_alerted === 1);
    if (change === 'alert') {
      this.#setAlerted.run(1);
      this.#feed.appendOther('balance.low', view, this.#rows.now());
    } else if (change === 'clear') {
      this.#setAlerted.run(0);
    }
  }

  #toPublic(row: LedgerRow | undefined): PublicBalance {
    return balanceView(row, this.lowThreshold);
  }
}
