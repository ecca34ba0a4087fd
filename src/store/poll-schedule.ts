import type { Statement, Transaction } from 'better-sqlite3';
import type { ReconcilerSettings } from '../config/config.js';
import { isFinalStatus } from '../upstream/model.js';
import { type LocalOrder, type OrderRow, toLocalOrder } from './local-order.js';
import { OrderPace } from './order-pace.js';
import type { OrderRows } from './order-rows.js';

/**
 * The settings of the schedule, in ms, as `reconcilerSettings(config)` gives them (defaults in
 * the config schema: `RECONCILE_FIRST_POLL_DELAY_S`, `RECONCILE_BACKOFF_S`,
 * `RECONCILE_STUCK_AFTER_H`, `RECONCILE_LEASE_S`, the audit's `RECONCILE_AUDIT_WINDOW_D` and
 * `RECONCILE_AUDIT_EVERY_S`, and the learned first poll's `RECONCILE_FIRST_POLL_QUANTILE`,
 * `_MIN_S`, `_MAX_S` and `RECONCILE_PACE_MIN_SAMPLES`). Every process that writes orders must use
 * the same ones, or the schedules they write disagree. Without `firstPollQuantile` (or with 0)
 * every first poll comes after the fixed `firstPollDelayMs`; without bounds, the learned one is
 * unbounded.
 */
export type PollScheduleSettings = Pick<
  ReconcilerSettings,
  'firstPollDelayMs' | 'backoffMs' | 'stuckAfterMs' | 'leaseMs' | 'auditWindowMs' | 'auditEveryMs'
> &
  Partial<
    Pick<ReconcilerSettings, 'firstPollQuantile' | 'firstPollMinMs' | 'firstPollMaxMs' | 'paceMinSamples'>
  >;

/** What the first poll of an order depends on: its product's pace, counted from its local creation. */
type FirstPollFields = Pick<OrderRow, 'product_code' | 'local_created_at'>;

/** The polling columns an order write sets (see {@link PollSchedule.afterChange}). */
export type PollingColumns = Pick<OrderRow, 'next_poll_at' | 'poll_count'>;

export interface RecordPollInput {
  /**
   * The poll's answer changed the order: the next poll comes after the first-poll delay and
   * `poll_count` (polls since the last change) restarts at 0, instead of the backoff going on.
   * Default: false.
   */
  changed?: boolean;
}

/** What a recorded poll came to: an answer that changed the order or not, or no usable answer. */
type PollOutcome = 'changed' | 'unchanged' | 'failed';

/** What decides whether an order is settled. */
type SettledFields = Pick<
  OrderRow,
  'status' | 'serial_number' | 'submission_state' | 'final_at' | 'stuck_at'
>;
/** A row with the poll lease (migration 2), which only the claims read or write. */
type LeasedOrderRow = OrderRow & { poll_leased_until: number | null };
/** What {@link PollSchedule.recordPoll} writes. */
type PollRecord = Pick<
  OrderRow,
  'id' | 'last_polled_at' | 'poll_count' | 'next_poll_at' | 'stuck_at' | 'updated_at'
>;

/**
 * When an order was last checked with the upstream, as SQL: its last poll or audit read, or when
 * it became final, whichever is later. The audit takes the least recently checked first, and
 * status reports how many were checked lately. The index `orders_audit` (migration 5) is on this
 * exact expression.
 */
export const CHECKED_AT_SQL = 'MAX(COALESCE(last_polled_at, 0), final_at)';

/**
 * Without its final state, or SUCCESS still without the serial number that may follow it: what
 * an order can be stuck in.
 */
function isIncomplete(row: Pick<OrderRow, 'final_at' | 'status' | 'serial_number'>): boolean {
  return row.final_at === null || (row.status === 'SUCCESS' && row.serial_number === null);
}

/** Throws a RangeError naming the first setting that cannot make a schedule. */
function checkSettings(settings: PollScheduleSettings): void {
  const { firstPollDelayMs, backoffMs, stuckAfterMs, leaseMs, auditWindowMs, auditEveryMs } = settings;
  if (!Number.isFinite(firstPollDelayMs) || firstPollDelayMs < 0) {
    throw new RangeError(`firstPollDelayMs must be a number of ms ≥ 0, got ${firstPollDelayMs}`);
  }
  if (!Array.isArray(backoffMs) || backoffMs.length === 0 || backoffMs.some((ms) => !(ms > 0))) {
    throw new RangeError(`backoffMs must be one or more intervals > 0 ms, got ${JSON.stringify(backoffMs)}`);
  }
  if (!(stuckAfterMs > 0)) throw new RangeError(`stuckAfterMs must be > 0 ms, got ${stuckAfterMs}`);
  if (!(leaseMs > 0)) throw new RangeError(`leaseMs must be > 0 ms, got ${leaseMs}`);
  if (!Number.isFinite(auditWindowMs) || auditWindowMs < 0) {
    throw new RangeError(`auditWindowMs must be a number of ms ≥ 0, got ${auditWindowMs}`);
  }
  if (!(auditEveryMs > 0)) throw new RangeError(`auditEveryMs must be > 0 ms, got ${auditEveryMs}`);
  const { firstPollMinMs = 0, firstPollMaxMs = Number.POSITIVE_INFINITY } = settings;
  if (!(firstPollMinMs >= 0 && firstPollMinMs <= firstPollMaxMs)) {
    throw new RangeError(
      `firstPollMinMs must be ≥ 0 and ≤ firstPollMaxMs, got ${firstPollMinMs} and ${firstPollMaxMs}`,
    );
  }
}

/**
 * When each order is polled (docs/reconciler.md, "Which orders, and when"): the rule, and its
 * bookkeeping in `orders` (`next_poll_at`, `poll_count`, `last_polled_at`, `stuck_at`, the lease).
 *
 * Invariant: `next_poll_at` is null exactly when the order is settled (see {@link isSettled}) or
 * queued for the submission pump ({@link claimNextQueued}), so the reconciler never loses an
 * open order. Every value of `next_poll_at` comes from here: the
 * order writer asks {@link afterChange} and {@link afterSubmissionOutcome} in the transaction of
 * its write, and the reconciler records its polls with {@link recordPoll}.
 *
 * Settings are validated at construction: a RangeError names the first unusable one.
 */
export class PollSchedule {
  readonly settings: Readonly<PollScheduleSettings>;
  /** The upstream's learned pace, which the writer feeds and the first poll reads. */
  readonly pace: OrderPace;
  readonly #rows: OrderRows;
  readonly #longestIntervalMs: number;
  readonly #due: Statement<[number, number], OrderRow>;
  readonly #claimable: Statement<[number, number, number], OrderRow>;
  readonly #setLease: Statement<[number, number]>;
  readonly #writePoll: Statement<[PollRecord]>;
  readonly #claimDueTx: Transaction<(limit: number, now: number, dueBy: number) => LocalOrder[]>;
  readonly #claimOneTx: Transaction<
    (ref: string, now: number) => { order: LocalOrder; claimed: boolean } | undefined
  >;
  readonly #releaseTx: Transaction<(partnerRef: string) => void>;
  readonly #claimAuditTx: Transaction<(now: number, checkedBefore: number) => LocalOrder | undefined>;
  readonly #recordPollTx: Transaction<(ref: string, outcome: PollOutcome) => LocalOrder>;
  readonly #claimQueuedTx: Transaction<(now: number) => LocalOrder | undefined>;

  constructor(rows: OrderRows, settings: PollScheduleSettings) {
    checkSettings(settings);
    const { firstPollDelayMs, backoffMs, stuckAfterMs, leaseMs, auditWindowMs, auditEveryMs } = settings;
    const { firstPollQuantile = 0, firstPollMinMs, firstPollMaxMs, paceMinSamples = 1 } = settings;
    this.settings = {
      firstPollDelayMs,
      backoffMs: [...backoffMs],
      stuckAfterMs,
      leaseMs,
      auditWindowMs,
      auditEveryMs,
      firstPollQuantile,
      firstPollMinMs,
      firstPollMaxMs,
      paceMinSamples,
    };
    this.pace = new OrderPace(
      rows,
      firstPollQuantile > 0 ? { quantile: firstPollQuantile, minSamples: paceMinSamples } : null,
    );
    this.#rows = rows;
    this.#longestIntervalMs = Math.max(...backoffMs);

    const { db } = rows;
    this.#due = db.prepare('SELECT * FROM orders WHERE next_poll_at <= ? ORDER BY next_poll_at, id LIMIT ?');
    this.#claimable = db.prepare(
      `SELECT * FROM orders
       WHERE next_poll_at <= ? AND (poll_leased_until IS NULL OR poll_leased_until <= ?)
       ORDER BY next_poll_at, id LIMIT ?`,
    );
    this.#setLease = db.prepare('UPDATE orders SET poll_leased_until = ? WHERE id = ?');
    const release = db.prepare<[string]>('UPDATE orders SET poll_leased_until = NULL WHERE partner_ref = ?');
    this.#writePoll = db.prepare(
      `UPDATE orders SET last_polled_at = @last_polled_at, poll_count = @poll_count,
         next_poll_at = @next_poll_at, stuck_at = @stuck_at, updated_at = @updated_at,
         poll_leased_until = NULL
       WHERE id = @id`,
    );

    this.#claimDueTx = db.transaction((limit, now, dueBy) => {
      const due = this.#claimable.all(dueBy, now, limit);
      for (const row of due) this.#setLease.run(now + leaseMs, row.id);
      return due.map(toLocalOrder);
    });
    this.#claimOneTx = db.transaction((ref, now) => {
      const row = rows.find(ref, ref);
      if (!row) return undefined;
      const { poll_leased_until: leasedUntil } = row as LeasedOrderRow;
      if (leasedUntil !== null && leasedUntil > now) return { order: toLocalOrder(row), claimed: false };
      this.#setLease.run(now + leaseMs, row.id);
      return { order: toLocalOrder(row), claimed: true };
    });
    this.#releaseTx = db.transaction((partnerRef) => {
      release.run(partnerRef);
    });
    // The audit's order: least recently checked first, from the partial index orders_audit.
    // Named, since without ANALYZE figures the planner prefers orders_status and sorts every
    // SUCCESS order on each claim.
    const auditable = db.prepare<{ now: number; finalSince: number; checkedBefore: number }, OrderRow>(
      `SELECT * FROM orders INDEXED BY orders_audit
       WHERE status = 'SUCCESS' AND next_poll_at IS NULL
         AND ${CHECKED_AT_SQL} < @checkedBefore
         AND final_at >= @finalSince
         AND (poll_leased_until IS NULL OR poll_leased_until <= @now)
       ORDER BY ${CHECKED_AT_SQL}, id LIMIT 1`,
    );
    /** Leases the one row a claim found, if any. */
    const leaseOne = (row: OrderRow | undefined, now: number) => {
      if (!row) return undefined;
      this.#setLease.run(now + leaseMs, row.id);
      return toLocalOrder(row);
    };
    this.#claimAuditTx = db.transaction((now, checkedBefore) =>
      leaseOne(auditable.get({ now, finalSince: now - this.settings.auditWindowMs, checkedBefore }), now),
    );
    this.#recordPollTx = db.transaction((ref, outcome) => this.#recordPoll(ref, outcome));
    const nextQueued = db.prepare<[number], OrderRow>(
      `SELECT * FROM orders INDEXED BY orders_queued
       WHERE submission_state = 'queued' AND (poll_leased_until IS NULL OR poll_leased_until <= ?)
       ORDER BY id LIMIT 1`,
    );
    this.#claimQueuedTx = db.transaction((now) => leaseOne(nextQueued.get(now), now));
  }

  /**
   * True when due polling ends: FAILED, REFUNDED, or SUCCESS with its serial number
   * (decisions.md: a serial may follow a SUCCESS). A SUCCESS still without its serial is settled
   * once it is stuck: its outcome is final, and a late serial still applies when it comes. A
   * rejected submission never existed upstream and is settled too. A SUCCESS may still be
   * refunded: the audit re-reads settled SUCCESS orders on idle capacity ({@link claimForAudit}).
   */
  isSettled(row: SettledFields): boolean {
    if (row.submission_state === 'rejected') return true;
    if (row.status === null || !isFinalStatus(row.status)) return false;
    if (row.status !== 'SUCCESS') return true;
    return row.serial_number !== null || row.stuck_at !== null;
  }

  /**
   * The polling columns of an order the writer creates or applies a snapshot to (`current` is
   * null for a new order; `changed` says the snapshot moved it):
   * - settled → no next poll;
   * - new or moved → first poll when its final webhook is overdue ({@link firstPollAt}), and the
   *   poll count restarts;
   * - otherwise (a duplicate or older event) the schedule stays as it was.
   */
  afterChange(
    next: SettledFields & FirstPollFields & Pick<OrderRow, 'poll_count'>,
    current: Pick<OrderRow, 'next_poll_at'> | null,
    changed: boolean,
    now: number,
  ): PollingColumns {
    if (this.isSettled(next)) return { next_poll_at: null, poll_count: next.poll_count };
    // The submission pump owns a queued order until it has sent it; nothing to poll before.
    if (next.submission_state === 'queued') return { next_poll_at: null, poll_count: 0 };
    const firstPollAt = this.firstPollAt(next, now);
    if (changed || current === null) return { next_poll_at: firstPollAt, poll_count: 0 };
    return { next_poll_at: current.next_poll_at ?? firstPollAt, poll_count: next.poll_count };
  }

  /**
   * The next poll of an order whose create call just ended without an order: none once the
   * submission is rejected; at once when its outcome is unknown, since only a poll can tell, or
   * when it is blocked (the reconciler submits it again once a probe shows the configuration
   * works, and takes it before the orders due after it).
   */
  afterSubmissionOutcome(row: SettledFields, now: number): Pick<OrderRow, 'next_poll_at'> {
    return { next_poll_at: this.isSettled(row) ? null : now };
  }

  /** Up to `limit` orders whose next poll time has come by `now`, the longest-due first. Reads only. */
  dueForPoll(limit: number, now: number = this.#rows.now()): LocalOrder[] {
    return this.#due.all(now, limit).map(toLocalOrder);
  }

  /**
   * Claims up to `limit` due orders for polling, longest-due first, in one immediate
   * transaction: each gets a lease (`poll_leased_until = now + leaseMs`) and orders under
   * another live lease are skipped, so two reconcilers never poll the same order at once. The
   * schedule (`next_poll_at`) is untouched: an order whose claim is released keeps its place.
   * {@link recordPoll} and {@link releasePollClaim} end the lease; a crashed poller's lease
   * simply expires. `dueBy` (default now) bounds which orders count as due: a pass passes its
   * start time, so an order it polled and rescheduled is not due again within the same pass.
   */
  claimDueForPoll(limit: number, { dueBy }: { dueBy?: number } = {}): LocalOrder[] {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`limit must be a whole number ≥ 1, got ${limit}`);
    }
    const now = this.#rows.now();
    return this.#rows.write(this.#claimDueTx, limit, now, Math.min(dueBy ?? now, now));
  }

  /**
   * Claims one order (by partner_ref, else invoice number) for an early poll, due or not, open
   * or settled: `claimed: false` when another poller holds a live lease on it; undefined when
   * the order is unknown locally.
   */
  claimForPoll(ref: string): { order: LocalOrder; claimed: boolean } | undefined {
    return this.#rows.write(this.#claimOneTx, ref, this.#rows.now());
  }

  /**
   * Claims the settled SUCCESS order the audit should re-read next, or undefined when none is
   * eligible: one that became final within `auditWindowMs`, whose last check ({@link CHECKED_AT_SQL}:
   * its last poll or audit read, or its becoming final) is at least `auditEveryMs` old and before `checkedBefore` (a pass gives
   * its start: no order is audited twice in one pass), not under another live lease; least
   * recently checked first. The audit records its read with {@link recordPoll}, which also sets
   * the check time, or releases the claim. Undefined at once when `auditWindowMs` is 0.
   */
  claimForAudit({ checkedBefore }: { checkedBefore?: number } = {}): LocalOrder | undefined {
    if (this.settings.auditWindowMs === 0) return undefined;
    const now = this.#rows.now();
    const bound = Math.min(now - this.settings.auditEveryMs + 1, checkedBefore ?? now);
    return this.#rows.write(this.#claimAuditTx, now, bound);
  }

  /**
   * Claims the oldest queued order (arrival order: the lowest row id) for the submission pump,
   * under the same lease as a poll, so two pumps never send the same order at once and a crashed
   * pump's order is taken again once its lease expires. Undefined when none is queued. The
   * submission's outcome (accepted, rejected, blocked, unknown) ends the queued state; a pump
   * that gives up releases the claim ({@link releasePollClaim}).
   */
  claimNextQueued(): LocalOrder | undefined {
    return this.#rows.write(this.#claimQueuedTx, this.#rows.now());
  }

  /** Ends a poll lease without recording a poll: the order keeps its place in the schedule. */
  releasePollClaim(partnerRef: string): void {
    this.#rows.write(this.#releaseTx, partnerRef);
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
   * - changed → at {@link firstPollAt}, as after a webhook: when the final webhook is overdue;
   * - otherwise the n-th poll in a row without a change → after `backoffMs[n - 1]`, the last
   *   entry repeating.
   *
   * Throws `ORDER_NOT_FOUND` for an unknown ref.
   */
  recordPoll(partnerRef: string, { changed = false }: RecordPollInput = {}): LocalOrder {
    return this.#rows.write(this.#recordPollTx, partnerRef, changed ? 'changed' : 'unchanged');
  }

  /**
   * Records a poll of this order that got no usable answer (5xx, no answer, after the client's
   * retries) and ends its lease: the order goes on its own backoff, as after a poll that changed
   * nothing (the n-th in a row waits `backoffMs[n - 1]`, stuck orders the longest interval), so it
   * goes behind the orders due before it and can never hold them up. `last_polled_at` stays: it
   * is the last time the upstream answered for the order.
   */
  recordFailedPoll(partnerRef: string): LocalOrder {
    return this.#rows.write(this.#recordPollTx, partnerRef, 'failed');
  }

  /**
   * When an order created or changed at `now` is first polled: when its final webhook is
   * overdue. Every first poll, after a write of the writer or a poll that found a change, is
   * computed here (docs/reconciler.md, "When the first poll comes"):
   * - with a learned pace ({@link OrderPace.estimate}): at its local creation + the
   *   `firstPollQuantile` of its product's time to a final state + the median webhook delivery
   *   delay, but no sooner than `firstPollMinMs` and no later than `firstPollMaxMs` from now;
   * - else (pace off, or too few samples yet) `firstPollDelayMs` from now.
   */
  firstPollAt(row: FirstPollFields, now: number): number {
    const pace = this.pace.estimate(row.product_code);
    if (!pace) return now + this.settings.firstPollDelayMs;
    const { firstPollMinMs = 0, firstPollMaxMs = Number.POSITIVE_INFINITY } = this.settings;
    const overdueAt = Math.round(row.local_created_at + pace.finalMs + pace.deliveryMs);
    return Math.min(Math.max(overdueAt, now + firstPollMinMs), now + firstPollMaxMs);
  }

  #recordPoll(ref: string, outcome: PollOutcome): LocalOrder {
    const now = this.#rows.now();
    const current = this.#rows.mustFind(ref);
    const { backoffMs, stuckAfterMs } = this.settings;
    const changed = outcome === 'changed';
    const stuck = isIncomplete(current) && now - current.local_created_at >= stuckAfterMs;
    const nextPollAt = stuck
      ? now + this.#longestIntervalMs
      : changed
        ? this.firstPollAt(current, now)
        : now + backoffMs[Math.min(current.poll_count, backoffMs.length - 1)]!;
    const record: PollRecord = {
      id: current.id,
      last_polled_at: outcome === 'failed' ? current.last_polled_at : now,
      poll_count: changed ? 0 : current.poll_count + 1,
      next_poll_at: null,
      stuck_at: stuck ? (current.stuck_at ?? now) : current.stuck_at,
      updated_at: now,
    };
    record.next_poll_at = this.isSettled({ ...current, stuck_at: record.stuck_at }) ? null : nextPollAt;
    this.#writePoll.run(record);
    return toLocalOrder({ ...current, ...record });
  }
}
