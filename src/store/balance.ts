import type {
  PublicBalanceDrift,
  PublicBalanceTotal,
  PublicUpstreamBalance,
} from '../catalog/public-catalog.js';
import {
  type AccountedOrder,
  accountingOf,
  balanceView,
  type LedgerRow,
  ledgerEntry,
  lowBalanceChange,
  totalBalance,
} from '../domain/balance-rules.js';
import { isDefaultUpstream } from '../upstream/model.js';
import { driftColumns, driftViewOf, observeReadInTx } from './balance-drift.js';
import type { ChangeFeed } from './feed.js';
import type { SqlExecutor } from './sql/executor.js';
import type { StoreContext } from './store-context.js';

/**
 * The balance without spending budget (docs/api.md, "Balance"), per upstream: each upstream's
 * `member_balance` of its last GET /profile (read by its catalog sync), minus the price of every
 * order of that upstream the upstream accepted since, plus what was debited for every one of its
 * orders that became FAILED or REFUNDED since, as decisions.md says the upstream debits and
 * credits. The order writer calls {@link BalanceLedger.accountOrderWrite} and
 * {@link BalanceLedger.recordInLedger} in the transaction of each order write, so the accounting
 * never misses or repeats an order; `balance.low` is appended in that same transaction, once each
 * time an upstream's balance falls under the threshold, naming the upstream. The accounting's
 * rules are pure, in domain/balance-rules.ts. Each profile read is also checked against the
 * balance expected (the drift, docs/api.md "Balance drift"; balance-drift.ts), and `balance.drift`
 * appended once per drift episode past the drift threshold.
 */
const GET = 'SELECT * FROM balance_ledger WHERE upstream = @upstream';

/** What an order write is to the accounting ({@link BalanceLedger.accountOrderWrite}). */
export interface OrderAccounting {
  /** The upstream whose ledger it goes to: the order's. */
  upstream: string;
  /** The debit to write into the order's `debited_amount` with its row (accepted now), else null: left as it is. */
  debitedAmount: { amount: number | null } | null;
  /** What the write adds to the ledger; `refunded`, the credit of a refund (the drift's `refunded`). */
  entry: { debit: number; credit: number; unpriced: number; refunded: number };
}

export class BalanceLedger {
  readonly #context: StoreContext;
  readonly #feed: ChangeFeed;
  /** The upstreams whose ledger row this process has seen ({@link recordInLedger}). */
  readonly #ledgerSeen = new Set<string>();
  /** BALANCE_LOW_THRESHOLD, each upstream's; 0 = no `balance.low`. */
  readonly lowThreshold: number;
  /** BALANCE_DRIFT_THRESHOLD, each upstream's; 0 = no drift episode, no `balance.drift`, no steered audit. */
  readonly driftThreshold: number;

  constructor(context: StoreContext, feed: ChangeFeed, lowThreshold = 0, driftThreshold = 0) {
    for (const [name, value] of [
      ['low balance', lowThreshold],
      ['balance drift', driftThreshold],
    ] as const) {
      if (!(Number.isFinite(value) && value >= 0)) {
        throw new RangeError(`the ${name} threshold must be a number ≥ 0, got ${value}`);
      }
    }
    this.#context = context;
    this.#feed = feed;
    this.lowThreshold = lowThreshold;
    this.driftThreshold = driftThreshold;
  }

  /**
   * The balance now: the sums over every upstream whose profile was read (all null before the
   * first read), and each one's in `upstreams`.
   */
  async view(): Promise<PublicBalanceTotal> {
    const rows = await this.#context.db.all<LedgerRow>('SELECT * FROM balance_ledger');
    return totalBalance(
      rows.map((row) => this.#toPublic(row.upstream, row)),
      this.lowThreshold,
    );
  }

  /** `upstream`'s balance now (null figures before its first profile read). */
  async viewOf(upstream: string): Promise<PublicUpstreamBalance> {
    return this.#toPublic(upstream, await this.#context.db.get<LedgerRow>(GET, { upstream }));
  }

  /**
   * Every upstream's balance drift at its last profile read (docs/api.md, "Balance drift"), the
   * default first, then by name; none before an upstream's first read.
   */
  async drifts(): Promise<PublicBalanceDrift[]> {
    const rows = await this.#context.db.all<LedgerRow>('SELECT * FROM balance_ledger');
    const views: PublicBalanceDrift[] = [];
    for (const row of rows) views.push(await driftViewOf(this.#context.db, row, this.driftThreshold));
    const rank = (view: PublicBalanceDrift) => (isDefaultUpstream(view.upstream) ? '' : view.upstream);
    return views.sort((a, b) => (rank(a) < rank(b) ? -1 : rank(a) > rank(b) ? 1 : 0));
  }

  /** `upstream`'s balance drift at its last profile read; undefined before its first. */
  async driftOf(upstream: string): Promise<PublicBalanceDrift | undefined> {
    const row = await this.#context.db.get<LedgerRow>(GET, { upstream });
    return row ? driftViewOf(this.#context.db, row, this.driftThreshold) : undefined;
  }

  /**
   * Takes `upstream`'s current drift as known (a top-up, a transfer the operator made): the
   * expected balance becomes its last profile balance, the episode ends, the audit is no longer
   * steered. Returns the drift it accepted, or undefined before the upstream's first read.
   */
  acceptDrift(upstream: string): Promise<PublicBalanceDrift | undefined> {
    return this.#context.db.write(async (tx) => {
      const row = await tx.get<LedgerRow>(GET, { upstream });
      if (!row) return undefined;
      const accepted = await driftViewOf(tx, row, this.driftThreshold);
      await tx.run(
        `UPDATE balance_ledger SET drift = 0, drift_unexplained = 0, drift_since = NULL, drift_alerted = 0,
           audit_owed = 0 WHERE upstream = @upstream`,
        { upstream },
      );
      return accepted;
    });
  }

  /**
   * Starts `upstream`'s accounting again from a profile read: `balance` as the upstream said at
   * `readAt`. First observes the read against the balance expected (its drift, recorded in
   * `balance_observations`; `balance.drift` when an episode's second read in a row is past the
   * drift threshold). Only inside a write transaction `tx` (the catalog sync's).
   */
  async refreshInTx(tx: SqlExecutor, upstream: string, balance: number, readAt: number): Promise<void> {
    // Locked (PostgreSQL): an order write that accounts meanwhile waits, and is then accounted
    // after the reset; read unlocked, its debit would be in neither the expected balance nor the
    // new ledger, a drift that would never cancel.
    const previous = await tx.get<LedgerRow>(`${GET} ${tx.dialect.forUpdate}`, { upstream });
    const observation = await observeReadInTx(tx, {
      upstream,
      balance,
      readAt,
      previous,
      threshold: this.driftThreshold,
    });
    const drift = driftColumns(observation);
    await tx.run(
      `INSERT INTO balance_ledger (upstream, profile_balance, profile_read_at, debited, credited, unpriced,
         drift, drift_unexplained, drift_since, drift_alerted, audit_owed, refunded)
       VALUES (@upstream, @balance, @readAt, 0, 0, 0,
         @drift, @drift_unexplained, @drift_since, @drift_alerted, @audit_owed, 0)
       ON CONFLICT (upstream) DO UPDATE SET profile_balance = @balance, profile_read_at = @readAt,
         debited = 0, credited = 0, unpriced = 0, drift = @drift, drift_unexplained = @drift_unexplained,
         drift_since = @drift_since, drift_alerted = @drift_alerted, audit_owed = @audit_owed, refunded = 0`,
      { upstream, balance, readAt, ...drift },
    );
    const row = await tx.get<LedgerRow>(GET, { upstream });
    if (observation.alert && row) {
      const view = await driftViewOf(tx, row, this.driftThreshold);
      await this.#feed.appendOther(tx, 'balance.drift', view, this.#context.now());
    }
    if (this.lowThreshold !== 0) await this.#checkLow(tx, row);
  }

  /**
   * The accounting of one order write, `current` → `next` (current null: a new row), in the order
   * writer's transaction `tx`, decided before the write: a debit when the upstream first accepts
   * the order, a credit when it first becomes FAILED or REFUNDED; null when the write is neither.
   * It goes to the ledger of the order's upstream. The debit is at the order's `amount` (what
   * the upstream debited), else the product's price in that upstream's local catalog (read here,
   * the one statement before the write); an order of neither is counted in `unpriced_orders`.
   * The debit is recorded on the order (`debitedAmount`: the writer writes it with the order row
   * into `orders.debited_amount`, even before the first profile read: the upstream debited it all
   * the same) and the credit is exactly it: not a price learnt or changed since, nothing for an
   * order accepted unpriced. {@link recordInLedger} then adds it.
   */
  async accountOrderWrite(
    tx: SqlExecutor,
    current: (AccountedOrder & { debited_amount: number | null }) | null,
    next: AccountedOrder & { upstream: string },
  ): Promise<OrderAccounting | null> {
    const accounting = accountingOf(current, next);
    if (!accounting.accepted && !accounting.credited) return null;
    let price: number | null = null;
    if (accounting.accepted) {
      price =
        next.amount ??
        (
          await tx.get<{ price: number }>(
            `SELECT price FROM catalog_products WHERE upstream = @upstream AND code = @code
             UNION ALL SELECT price FROM catalog_products WHERE upstream = @upstream AND id = @id LIMIT 1`,
            { upstream: next.upstream, code: next.product_code, id: next.product_id },
          )
        )?.price ??
        null;
    }
    // What the order's acceptance debited: this write's price, else what the row holds (the
    // order writer reads it with the row, locked; its write never changes it).
    const debited = accounting.accepted ? price : (current?.debited_amount ?? null);
    const entry = ledgerEntry(accounting, price, debited);
    return {
      upstream: next.upstream,
      debitedAmount: accounting.accepted ? { amount: price } : null,
      entry: { ...entry, refunded: next.status === 'REFUNDED' ? entry.credit : 0 },
    };
  }

  /**
   * Adds an {@link accountOrderWrite} to its upstream's ledger, in the same transaction, after the
   * order row's write. Issues its first statement at the call (sql/together.ts). Once this
   * process has seen that ledger row, that statement is `UPDATE … RETURNING *`, which also
   * answers whether the row is there and its new state for `balance.low` (one statement where
   * reading, updating and reading again were three). Before, it is the read of the row (the
   * cheap statement while there is none, before the upstream's first profile read), and the
   * update follows only when it found one. A ledger row is never deleted; were it, the update's
   * empty answer says so.
   */
  recordInLedger(tx: SqlExecutor, accounting: OrderAccounting): Promise<void> {
    const { upstream } = accounting;
    if (!this.#ledgerSeen.has(upstream)) {
      return tx.get<LedgerRow>(GET, { upstream }).then((found) => {
        if (!found) return;
        this.#ledgerSeen.add(upstream);
        return this.recordInLedger(tx, accounting);
      });
    }
    return tx
      .get<LedgerRow>(
        `UPDATE balance_ledger SET debited = debited + @debit, credited = credited + @credit,
           unpriced = unpriced + @unpriced, refunded = refunded + @refunded
         WHERE upstream = @upstream RETURNING *`,
        { ...accounting.entry, upstream },
      )
      .then((row) => {
        if (!row) {
          this.#ledgerSeen.delete(upstream);
          return;
        }
        return this.#checkLow(tx, row);
      });
  }

  /**
   * `balance.low` of an upstream once per crossing: when its balance falls under the threshold,
   * not again until it is back over. The event's data is that upstream's balance.
   */
  async #checkLow(tx: SqlExecutor, row: LedgerRow | undefined): Promise<void> {
    if (this.lowThreshold === 0 || !row) return;
    const view = this.#toPublic(row.upstream, row);
    const change = lowBalanceChange(view.balance!, this.lowThreshold, row.low_alerted === 1);
    if (change === 'alert') {
      await tx.run('UPDATE balance_ledger SET low_alerted = 1 WHERE upstream = @upstream', {
        upstream: row.upstream,
      });
      await this.#feed.appendOther(tx, 'balance.low', view, this.#context.now());
    } else if (change === 'clear') {
      await tx.run('UPDATE balance_ledger SET low_alerted = 0 WHERE upstream = @upstream', {
        upstream: row.upstream,
      });
    }
  }

  #toPublic(upstream: string, row: LedgerRow | undefined): PublicUpstreamBalance {
    return balanceView(upstream, row, this.lowThreshold);
  }
}
