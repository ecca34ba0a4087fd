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
import type { SqlExecutor } from './sql/executor.js';

/**
 * The balance without spending budget (docs/api.md, "Balance"): the `member_balance` of the last
 * GET /profile (read by the catalog sync), minus the price of every order the upstream accepted
 * since, plus what was debited for every order that became FAILED or REFUNDED since, as
 * decisions.md says the upstream debits and credits. The order writer calls {@link BalanceLedger.afterOrderWrite}
 * in the transaction of each order write, so the accounting never misses or repeats an order;
 * `balance.low` is appended in that same transaction, once each time the balance falls under
 * the threshold. The accounting's rules are pure, in rules/balance-rules.ts.
 */
const GET = 'SELECT * FROM balance_ledger WHERE id = 1';

export class BalanceLedger {
  readonly #rows: OrderRows;
  readonly #feed: ChangeFeed;
  /** BALANCE_LOW_THRESHOLD; 0 = no `balance.low`. */
  readonly lowThreshold: number;

  constructor(rows: OrderRows, feed: ChangeFeed, lowThreshold = 0) {
    if (!(Number.isFinite(lowThreshold) && lowThreshold >= 0)) {
      throw new RangeError(`the low balance threshold must be a number ≥ 0, got ${lowThreshold}`);
    }
    this.#rows = rows;
    this.#feed = feed;
    this.lowThreshold = lowThreshold;
  }

  /** The balance now (all null before the first profile read). */
  async view(): Promise<PublicBalance> {
    return this.#toPublic(await this.#rows.db.get<LedgerRow>(GET));
  }

  /**
   * Starts the accounting again from a profile read: `balance` as the upstream said at `readAt`.
   * Only inside a write transaction `tx` (the catalog sync's).
   */
  async refreshInTx(tx: SqlExecutor, balance: number, readAt: number): Promise<void> {
    await tx.run(
      `INSERT INTO balance_ledger (id, profile_balance, profile_read_at, debited, credited, unpriced)
       VALUES (1, @balance, @readAt, 0, 0, 0)
       ON CONFLICT (id) DO UPDATE SET profile_balance = @balance, profile_read_at = @readAt,
         debited = 0, credited = 0, unpriced = 0`,
      { balance, readAt },
    );
    await this.#checkLow(tx);
  }

  /**
   * The accounting of one order write, `current` → `next` (current null: a new row), inside the
   * order writer's transaction `tx`, after the write of the order row `orderId`: a debit when the
   * upstream first accepts the order, a credit when it first becomes FAILED or REFUNDED. The debit
   * is at the order's `amount` (what the upstream debited), else the product's price in the local
   * catalog; an order of neither is counted in `unpriced_orders`. The debit is recorded on the
   * order (`orders.debited_amount`, even before the first profile read: the upstream debited it
   * all the same) and the credit is exactly it: not a price learnt or changed since, nothing for
   * an order accepted unpriced. The ledger changes only after the first profile read.
   */
  async afterOrderWrite(
    tx: SqlExecutor,
    orderId: number,
    current: AccountedOrder | null,
    next: AccountedOrder,
  ): Promise<void> {
    const accounting = accountingOf(current, next);
    if (!accounting.accepted && !accounting.credited) return;
    let price: number | null = null;
    if (accounting.accepted) {
      price =
        next.amount ??
        (
          await tx.get<{ price: number }>(
            `SELECT price FROM catalog_products WHERE code = @code
             UNION ALL SELECT price FROM catalog_products WHERE id = @id LIMIT 1`,
            { code: next.product_code, id: next.product_id },
          )
        )?.price ??
        null;
      await tx.run('UPDATE orders SET debited_amount = @price WHERE id = @id', { price, id: orderId });
    }
    const debited = accounting.accepted
      ? price
      : ((
          await tx.get<{ debited_amount: number | null }>(
            'SELECT debited_amount FROM orders WHERE id = @id',
            {
              id: orderId,
            },
          )
        )?.debited_amount ?? null);
    if (!(await tx.get<LedgerRow>(GET))) return;
    await tx.run(
      `UPDATE balance_ledger SET debited = debited + @debit, credited = credited + @credit,
         unpriced = unpriced + @unpriced WHERE id = 1`,
      ledgerEntry(accounting, price, debited),
    );
    await this.#checkLow(tx);
  }

  /** `balance.low` once per crossing: when the balance falls under the threshold, not again until it is back over. */
  async #checkLow(tx: SqlExecutor): Promise<void> {
    if (this.lowThreshold === 0) return;
    const row = await tx.get<LedgerRow>(GET);
    if (!row) return;
    const view = this.#toPublic(row);
    const change = lowBalanceChange(view.balance!, this.lowThreshold, row.low_alerted === 1);
    if (change === 'alert') {
      await tx.run('UPDATE balance_ledger SET low_alerted = 1 WHERE id = 1');
      await this.#feed.appendOther(tx, 'balance.low', view, this.#rows.now());
    } else if (change === 'clear') {
      await tx.run('UPDATE balance_ledger SET low_alerted = 0 WHERE id = 1');
    }
  }

  #toPublic(row: LedgerRow | undefined): PublicBalance {
    return balanceView(row, this.lowThreshold);
  }
}
