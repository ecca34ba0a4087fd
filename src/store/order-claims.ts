import { randomUUID } from 'node:crypto';
import { isEndedAttempt } from '../domain/attempt-records.js';
import {
  checkScheduleSettings,
  type PollOutcome,
  type PollScheduleSettings,
  planPollRecord,
} from '../domain/poll-rules.js';
import { DEFAULT_UPSTREAM } from '../upstream/model.js';
import { auditSteeringOf } from './balance-drift.js';
import { type LocalOrder, type OrderRow, toLocalOrder } from './local-order.js';
import type { PollPlans } from './poll-plans.js';
import type { SqlExecutor } from './sql/executor.js';
import type { StoreContext } from './store-context.js';

export type { PollingColumns, PollScheduleSettings } from '../domain/poll-rules.js';

export interface RecordPollInput {
  /**
   * The poll's answer changed the order: the next poll comes after the first-poll delay and
   * `poll_count` (polls since the last change) restarts at 0, instead of the backoff going on.
   * Default: false.
   */
  changed?: boolean;
  /**
   * The claim the poll was made under: only it ends. Without one, whatever lease the order has
   * ends (a caller that claimed nothing).
   */
  claim?: string;
}

/** A row with the poll lease (migration 2), which only the claims read or write. */
/**
 * When an order was last checked with the upstream, as SQL: its last poll or audit read, or when
 * it became final, whichever is later. The audit takes the least recently checked first, and
 * status reports how many were checked lately. The index `orders_audit` (migration 5) is on this
 * exact expression.
 */
export const CHECKED_AT_SQL = 'MAX(COALESCE(last_polled_at, 0), final_at)';

/** {@link CHECKED_AT_SQL} in a backend's dialect (SQLite's scalar MAX is PostgreSQL's GREATEST). */
export function checkedAtSql(ex: Pick<SqlExecutor, 'dialect'>): string {
  return ex.dialect.greatest('COALESCE(last_polled_at, 0)', 'final_at');
}

const SET_LEASE = 'UPDATE orders SET poll_leased_until = @until, lease_token = @token WHERE id = @id';

/**
 * An order claimed for polling or sending (docs/reconciler.md, "Claims"): while `leasedUntil`
 * (ms, the store's clock) has not passed, no other process claims it. `claim` names this claim:
 * only its holder renews it ({@link OrderClaims.renewClaim}), sends the order's create
 * (`OrderWriter.startSubmission`) or ends it.
 */
export type ClaimedOrder = LocalOrder & { readonly claim: string; readonly leasedUntil: number };

/**
 * The due orders {@link OrderClaims.claimDueForPoll} claims: one upstream's, longest due first,
 * read in the order of `orders_open` (upstream, next_poll_at, id, of the open orders only:
 * schema 32), so a reconciler never reads another upstream's due orders however many there are
 * (test/store/reconcile-plan.test.ts).
 */
export function dueClaimSql(skipLocked: string): string {
  return `SELECT * FROM orders
         WHERE next_poll_at <= @dueBy AND (poll_leased_until IS NULL OR poll_leased_until <= @now)
           AND upstream = @upstream
         ORDER BY next_poll_at, id LIMIT @limit ${skipLocked}`;
}

/**
 * The claims on orders: who may poll, audit or send an order now (docs/reconciler.md, "Claims").
 * A claim is a lease of `leaseMs` named by a token; while it lasts, no other process takes the
 * order. They are taken by the reconciler's polls ({@link claimDueForPoll}) and its audit
 * ({@link claimForAudit}), by the early polls and `placeOrder` ({@link claimOrder}), and by the
 * submission pump, whose queue of the shop's orders is read here ({@link claimNextQueued}). A
 * holder renews its claim while it works ({@link renewClaim}, orders/hold-claim.ts) and ends it
 * by releasing it ({@link releaseClaim}) or by the record of its poll ({@link recordPoll},
 * {@link recordFailedPoll}: `last_polled_at`, `poll_count`, `next_poll_at`, `stuck_at`), which
 * sets the order's next poll by the pure rules of domain/poll-rules.ts. The settings are the
 * reconciler's; a writer sets a new or moved order's first poll by its product's plan
 * (poll-plans.ts) and needs none of them, so the store is opened without them and the processes
 * that poll, audit or send add the claims (order-store.ts, `withClaims`).
 *
 * Invariant: `next_poll_at` is null exactly when the order is settled (`isSettled`) or queued for
 * the submission pump ({@link claimNextQueued}), so the reconciler never loses an open order.
 *
 * Settings are validated at construction: a RangeError names the first unusable one.
 */
export class OrderClaims {
  readonly settings: Readonly<PollScheduleSettings>;
  /** The upstream whose orders these claims take (docs/upstreams.md): its client is the one that calls. */
  readonly upstream: string;
  readonly #context: StoreContext;
  readonly #plans: PollPlans;

  constructor(
    store: { readonly context: StoreContext; readonly pollPlans: PollPlans },
    settings: PollScheduleSettings,
    upstream: string = DEFAULT_UPSTREAM,
  ) {
    checkScheduleSettings(settings);
    this.upstream = upstream;
    this.settings = { ...settings, backoffMs: [...settings.backoffMs] };
    this.#context = store.context;
    this.#plans = store.pollPlans;
  }

  /** Up to `limit` orders whose next poll time has come by `now`, the longest-due first. Reads only. */
  async dueForPoll(limit: number, now: number = this.#context.now()): Promise<LocalOrder[]> {
    const rows = await this.#context.db.all<OrderRow>(
      'SELECT * FROM orders WHERE next_poll_at <= @now AND upstream = @upstream ORDER BY next_poll_at, id LIMIT @limit',
      { now, limit, upstream: this.upstream },
    );
    return rows.map(toLocalOrder);
  }

  /**
   * Claims up to `limit` due orders for polling, longest-due first, in one immediate
   * transaction: each gets a lease (`poll_leased_until = now + leaseMs`) and orders under
   * another live lease are skipped, so two reconcilers never poll the same order at once. The
   * schedule (`next_poll_at`) is untouched: an order whose claim is released keeps its place.
   * {@link recordPoll} and {@link releaseClaim} end the lease; a crashed poller's lease
   * simply expires. `dueBy` (default now) bounds which orders count as due: a pass passes its
   * start time, so an order it polled and rescheduled is not due again within the same pass.
   */
  async claimDueForPoll(limit: number, { dueBy }: { dueBy?: number } = {}): Promise<ClaimedOrder[]> {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`limit must be a whole number ≥ 1, got ${limit}`);
    }
    return this.#context.db.write(async (tx) => {
      const now = this.#context.now();
      const due = await tx.all<OrderRow>(dueClaimSql(tx.dialect.skipLocked), {
        dueBy: Math.min(dueBy ?? now, now),
        now,
        limit,
        upstream: this.upstream,
      });
      const claimed: ClaimedOrder[] = [];
      for (const row of due) claimed.push(await this.#lease(tx, row, now));
      return claimed;
    });
  }

  /**
   * Claims one order (by partner_ref, else invoice number), due or not, open or settled: for an
   * early poll, or for `placeOrder` to send its create. `claimed: false` when another process
   * holds a live claim on it, and for an order of another upstream (its `upstream` says which: no
   * client of this one may call about it); undefined when the order is unknown locally.
   */
  claimOrder(
    ref: string,
  ): Promise<{ order: ClaimedOrder; claimed: true } | { order: LocalOrder; claimed: false } | undefined> {
    return this.#context.db.write(async (tx) => {
      const now = this.#context.now();
      const row = await this.#context.findForWrite(tx, ref, ref, this.upstream);
      if (!row) return undefined;
      if (row.upstream !== this.upstream) return { order: toLocalOrder(row), claimed: false };
      const { poll_leased_until: leasedUntil } = row;
      if (leasedUntil !== null && leasedUntil > now) return { order: toLocalOrder(row), claimed: false };
      return { order: await this.#lease(tx, row, now), claimed: true };
    });
  }

  /**
   * Claims the settled SUCCESS order the audit should re-read next, or undefined when none is
   * eligible: one that became final within `auditWindowMs`, whose last check ({@link CHECKED_AT_SQL}:
   * its last poll or audit read, or its becoming final) is at least `auditEveryMs` old and before `checkedBefore` (a pass gives
   * its start: no order is audited twice in one pass), not under another live lease; least
   * recently checked first. The audit records its read with {@link recordPoll}, which also sets
   * the check time, or releases the claim. Undefined at once when `auditWindowMs` is 0.
   *
   * While the upstream's balance drift steers the audit (money came back that no order explains:
   * docs/api.md, "Balance drift"; balance-drift.ts), it first takes the most recently final of
   * those orders not checked since the drift episode began, whatever `auditEveryMs`: an order
   * checked after the profile read that showed the drift cannot hide a refund that read counted.
   * Once none is left, the least recently checked again.
   */
  async claimForAudit({ checkedBefore }: { checkedBefore?: number } = {}): Promise<ClaimedOrder | undefined> {
    if (this.settings.auditWindowMs === 0) return undefined;
    return this.#context.db.write(async (tx) => {
      const now = this.#context.now();
      const steeredSince = await auditSteeringOf(tx, this.upstream);
      if (steeredSince !== undefined) {
        const steered = await tx.get<OrderRow>(
          `SELECT * FROM orders ${tx.dialect.indexedBy('orders_success_by_upstream')}
           WHERE upstream = @upstream AND status = 'SUCCESS' AND next_poll_at IS NULL
             AND final_at >= @finalSince AND ${checkedAtSql(tx)} < @checkedBefore
             AND (poll_leased_until IS NULL OR poll_leased_until <= @now)
           ORDER BY final_at DESC, id DESC LIMIT 1 ${tx.dialect.skipLocked}`,
          {
            now,
            finalSince: now - this.settings.auditWindowMs,
            checkedBefore: Math.min(steeredSince, checkedBefore ?? now),
            upstream: this.upstream,
          },
        );
        if (steered) return this.#leaseOne(tx, steered, now);
      }
      const bound = Math.min(now - this.settings.auditEveryMs + 1, checkedBefore ?? now);
      // The audit's order: least recently checked first, from the partial index orders_audit.
      // Named on SQLite, since without ANALYZE figures its planner prefers orders_status and
      // sorts every SUCCESS order on each claim.
      const checkedAt = checkedAtSql(tx);
      const row = await tx.get<OrderRow>(
        `SELECT * FROM orders ${tx.dialect.indexedBy('orders_audit')}
         WHERE status = 'SUCCESS' AND next_poll_at IS NULL
           AND ${checkedAt} < @checkedBefore
           AND final_at >= @finalSince
           AND (poll_leased_until IS NULL OR poll_leased_until <= @now)
           AND upstream = @upstream
         ORDER BY ${checkedAt}, id LIMIT 1 ${tx.dialect.skipLocked}`,
        { now, finalSince: now - this.settings.auditWindowMs, checkedBefore: bound, upstream: this.upstream },
      );
      return this.#leaseOne(tx, row, now);
    });
  }

  /**
   * Claims the oldest queued order (arrival order: the lowest row id) for the submission pump,
   * under the same lease as a poll, so two pumps never send the same order at once and a crashed
   * pump's order is taken again once its lease expires. `writtenSince` (ms) leaves out orders
   * written before it: too old to send (API_SUBMISSION_MAX_AGE_S; the writer's
   * `expireWaitingOrders` cancels them); but not one whose create may have reached the upstream
   * (`create_in_doubt_at`: a pump died or failed after sending it), which can be neither
   * cancelled nor expired and is sent again with its partner_ref, so the upstream answers with
   * the order it has. Undefined when none is queued. The submission's outcome
   * (accepted, rejected, blocked, unknown) ends the queued state; a pump that gives up releases
   * the claim ({@link releaseClaim}).
   */
  claimNextQueued({ writtenSince }: { writtenSince?: number } = {}): Promise<ClaimedOrder | undefined> {
    return this.#context.db.write(async (tx) => {
      const now = this.#context.now();
      const row = await tx.get<OrderRow>(
        `SELECT * FROM orders ${tx.dialect.indexedBy('orders_queued')}
         WHERE submission_state = 'queued' AND (poll_leased_until IS NULL OR poll_leased_until <= @now)
           AND (local_created_at >= @writtenSince OR create_in_doubt_at IS NOT NULL)
           AND upstream = @upstream
         ORDER BY id LIMIT 1 ${tx.dialect.skipLocked}`,
        { now, writtenSince: writtenSince ?? 0, upstream: this.upstream },
      );
      return this.#leaseOne(tx, row, now);
    });
  }

  /**
   * Ends a claim without recording a poll: the order keeps its place in the schedule. Only the
   * claim named `claim` ends: a claim that ran out and was taken by another process stays.
   */
  async releaseClaim(partnerRef: string, claim: string): Promise<void> {
    await this.#context.db.run(
      'UPDATE orders SET poll_leased_until = NULL, lease_token = NULL WHERE partner_ref = @partnerRef AND lease_token = @claim',
      { partnerRef, claim },
    );
  }

  /**
   * Extends the claim named `claim` by `leaseMs` from now, while its holder still works on the
   * order (orders/hold-claim.ts). Returns the new end of the lease (the store's clock), or
   * undefined when the claim is no longer this holder's: it ran out and another took it, or it
   * ended.
   */
  renewClaim(partnerRef: string, claim: string): Promise<number | undefined> {
    return this.#context.db.write(async (tx) => {
      const until = this.#context.now() + this.settings.leaseMs;
      const { changes } = await tx.run(
        'UPDATE orders SET poll_leased_until = @until WHERE partner_ref = @partnerRef AND lease_token = @claim',
        { until, partnerRef, claim },
      );
      return changes === 1 ? until : undefined;
    });
  }

  /** The store's clock, in ms: what leases are counted on. */
  now(): number {
    return this.#context.now();
  }

  /**
   * Records a poll of an order, after its answer (if any) went through the writer's
   * `applyOrderSnapshot`, and ends its lease. It sets `last_polled_at`, counts the poll (or
   * restarts the count when the poll `changed` the order), and sets the next poll:
   * - settled → none;
   * - open longer than `stuckAfterMs` since its local creation without a final state → marked
   *   stuck (`stuck_at`, the first marking kept) and polled at the longest backoff interval;
   *   a SUCCESS still without its serial is marked stuck the same way, and then settled (its
   *   outcome is final: it is not polled on for the serial, which still applies when it comes);
   * - changed → at its product's first poll (poll-rules.ts, `firstPollAt`), as after a webhook:
   *   when the final webhook is overdue;
   * - otherwise the n-th poll in a row without a change → after `backoffMs[n - 1]`, the last
   *   entry repeating.
   *
   * Throws `ORDER_NOT_FOUND` for an unknown ref.
   */
  recordPoll(partnerRef: string, { changed = false, claim }: RecordPollInput = {}): Promise<LocalOrder> {
    return this.#recordPoll(partnerRef, changed ? 'changed' : 'unchanged', claim);
  }

  /**
   * Records a poll of this order that got no usable answer (5xx, no answer, after the client's
   * retries) and ends its lease: the order goes on its own backoff, as after a poll that changed
   * nothing (the n-th in a row waits `backoffMs[n - 1]`, stuck orders the longest interval), so it
   * goes behind the orders due before it and can never hold them up. `last_polled_at` stays: it
   * is the last time the upstream answered for the order. `claim` as for {@link recordPoll}.
   */
  recordFailedPoll(partnerRef: string, { claim }: Pick<RecordPollInput, 'claim'> = {}): Promise<LocalOrder> {
    return this.#recordPoll(partnerRef, 'failed', claim);
  }

  #recordPoll(ref: string, outcome: PollOutcome, claim: string | undefined): Promise<LocalOrder> {
    return this.#context.db.write(async (tx) => {
      const now = this.#context.now();
      const current = await this.#context.mustFindForWrite(tx, ref);
      // The polled attempt ended since (its order went on to the next upstream): nothing to record.
      if (isEndedAttempt(current, ref)) return toLocalOrder(current);
      const record = planPollRecord(this.settings, current, outcome, now, await this.#plans.lookup(tx));
      const ends = claim === undefined || current.lease_token === claim;
      await tx.run(
        `UPDATE orders SET last_polled_at = @last_polled_at, poll_count = @poll_count,
           next_poll_at = @next_poll_at, stuck_at = @stuck_at, updated_at = @updated_at
           ${ends ? ', poll_leased_until = NULL, lease_token = NULL' : ''}
         WHERE id = @id`,
        record,
      );
      return toLocalOrder({ ...current, ...record });
    });
  }

  /** Leases the one row a claim found, if any. */
  async #leaseOne(
    tx: SqlExecutor,
    row: OrderRow | undefined,
    now: number,
  ): Promise<ClaimedOrder | undefined> {
    return row ? this.#lease(tx, row, now) : undefined;
  }

  /** Gives `row` a new claim: a lease of `leaseMs` from `now`, named by a new token. */
  async #lease(tx: SqlExecutor, row: OrderRow, now: number): Promise<ClaimedOrder> {
    const claim = randomUUID();
    const leasedUntil = now + this.settings.leaseMs;
    await tx.run(SET_LEASE, { until: leasedUntil, token: claim, id: row.id });
    return { ...toLocalOrder(row), claim, leasedUntil };
  }
}
