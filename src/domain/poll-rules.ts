import type { OrderRow } from '../store/local-order.js';
import { parseUpstreamTime } from '../upstream/upstream-time.js';
import type { PaceEstimate } from './pace-math.js';
import { isFinalStatus } from './state-machine.js';

/**
 * When an order is polled (docs/reconciler.md, "Which orders, and when"), as pure functions of
 * the order's row, the time, the first-poll plan of its upstream and product and, for the reconciler's own
 * records, the schedule's settings: no SQL. The writer asks {@link afterChange} in the
 * transaction of its write; the store's `OrderClaims` (order-claims.ts) asks
 * {@link planPollRecord}. Every backend goes through the same functions, so the rule exists once.
 */

/**
 * The reconciler's schedule settings, in ms, as `reconcilerSettings(config)` gives them (their
 * defaults are in the config schema). Only the reconciler, the submission pump and the CLI's
 * polls and creates read them: a writer needs none (its first polls come from `poll_plans`, which
 * the reconciler writes). Declared here rather than imported from the config, so that the config,
 * which imports components, is never imported back by one.
 */
export interface PollScheduleSettings {
  /** `RECONCILE_FIRST_POLL_DELAY_S`: the first poll after a creation or change, when no pace is learned. */
  firstPollDelayMs: number;
  /** `RECONCILE_BACKOFF_S`: the intervals between polls of an unchanging order; the last repeats. */
  backoffMs: number[];
  /** `RECONCILE_STUCK_AFTER_H`: without a final state for this long, an order is marked stuck. */
  stuckAfterMs: number;
  /** `RECONCILE_LEASE_S`: how long a claim on an order keeps it from every other process. */
  leaseMs: number;
  /** `RECONCILE_AUDIT_WINDOW_D`: how long a SUCCESS order is audited after it became final; 0: never. */
  auditWindowMs: number;
  /** `RECONCILE_AUDIT_EVERY_S`: how long before the audit reads the same order again. */
  auditEveryMs: number;
  /**
   * `RECONCILE_FIRST_POLL_QUANTILE`: the learned first poll's share of the product's orders
   * final by then. Without it (or 0) every first poll comes after `firstPollDelayMs`.
   */
  firstPollQuantile?: number;
  /** `RECONCILE_FIRST_POLL_MIN_S`: the earliest learned first poll. Without it: 0. */
  firstPollMinMs?: number;
  /** `RECONCILE_FIRST_POLL_MAX_S`: the latest learned first poll. Without it: unbounded. */
  firstPollMaxMs?: number;
  /** `RECONCILE_PACE_MIN_SAMPLES`: a product's final webhooks before its own pace is used. Without it: 1. */
  paceMinSamples?: number;
}

/** The settings {@link planPollRecord} reads. */
export type ScheduleRuleSettings = Pick<PollScheduleSettings, 'backoffMs' | 'stuckAfterMs'>;

/**
 * When the first poll of a product's orders comes after a creation or change (a row of
 * `poll_plans`, which the reconciler writes from its learned pace: reconciler/learn-pace.ts):
 * at the order's creation ({@link pollBaseOf}) + `finalMs` + `deliveryMs`, but no sooner than
 * `minMs` and no later than `maxMs` after the change. Without a learned pace `finalMs` and
 * `deliveryMs` are 0 and both bounds the fixed delay, so the first poll comes that long after
 * the change.
 */
export interface FirstPollPlan {
  /** The learned quantile of the product's time from creation to a final state, in ms (0: none learned). */
  finalMs: number;
  /** The median delivery delay of a webhook, in ms. */
  deliveryMs: number;
  /** The earliest first poll after the change, in ms. */
  minMs: number;
  /** The latest first poll after the change, in ms. */
  maxMs: number;
  /**
   * The product's own outlier time (`outlierBoundMs`, pace-math.ts), or null: not learned from
   * the product's own orders. An answered poll of an order open longer goes to the backoff's cap.
   */
  outlierMs: number | null;
  /** The samples the pace rests on (0: none learned). */
  samples: number;
}

/** What a first-poll plan is looked up by: the order's upstream and its product there. */
export type FirstPollKey = Pick<OrderRow, 'upstream' | 'product_code'>;

/**
 * The plan of every upstream's products, as the writer reads it (store/poll-plans.ts): the
 * order's upstream's plan of its product, else that upstream's plan of every product, else the
 * fixed delay. Never another upstream's: each supplier has its own pace.
 */
export type FirstPollLookup = (order: FirstPollKey) => FirstPollPlan;

/** `RECONCILE_FIRST_POLL_DELAY_S`'s default, in ms: 30 s. */
export const DEFAULT_FIRST_POLL_DELAY_MS = 30_000;

/** The first poll before any reconciler has planned one: the default delay after the change. */
export const FIXED_FIRST_POLL: FirstPollPlan = fixedFirstPoll(DEFAULT_FIRST_POLL_DELAY_MS);

/** The plan of a fixed delay: the first poll comes `delayMs` after the change. */
export function fixedFirstPoll(delayMs: number): FirstPollPlan {
  return { finalMs: 0, deliveryMs: 0, minMs: delayMs, maxMs: delayMs, outlierMs: null, samples: 0 };
}

/**
 * The plan of a learned pace (`estimate`, null when too few samples or the pace is off): its
 * quantile and delivery delay within the bounds of the settings; else the fixed delay.
 */
export function firstPollPlan(
  settings: Pick<PollScheduleSettings, 'firstPollDelayMs' | 'firstPollMinMs' | 'firstPollMaxMs'>,
  estimate: PaceEstimate | null,
): FirstPollPlan {
  if (!estimate) return fixedFirstPoll(settings.firstPollDelayMs);
  const { firstPollMinMs = 0, firstPollMaxMs = Number.POSITIVE_INFINITY } = settings;
  return {
    finalMs: Math.round(estimate.finalMs),
    deliveryMs: Math.round(estimate.deliveryMs),
    minMs: firstPollMinMs,
    maxMs: firstPollMaxMs,
    outlierMs:
      estimate.scope === 'product' && Number.isFinite(estimate.outlierMs)
        ? Math.round(estimate.outlierMs)
        : null,
    samples: Math.round(estimate.samples),
  };
}

/**
 * What the first poll of an order depends on: its product's pace, counted from its creation
 * upstream (see {@link pollBaseOf}).
 */
export type FirstPollFields = FirstPollKey & Pick<OrderRow, 'local_created_at' | 'created_at'>;

/**
 * The instant an order's time to a final state counts from, on the local clock: its local
 * creation, or its creation upstream when that is later, i.e. when the order waited before it
 * was sent (in the shop API's submission queue, or for a budget slot in a burst), but never
 * later than `now`. The pace is learned from the upstream's `created_at` too, so a first poll
 * counted from the local creation of an order that waited two minutes for a slot would come
 * at once, find it PENDING and waste a slot exactly when slots are scarcest. The `now` bound
 * keeps an upstream clock that runs ahead from pushing the poll beyond what it says.
 */
export function pollBaseOf(row: Pick<OrderRow, 'local_created_at' | 'created_at'>, now: number): number {
  const upstream = parseUpstreamTime(row.created_at);
  if (!Number.isFinite(upstream)) return row.local_created_at;
  return Math.max(row.local_created_at, Math.min(upstream, now));
}

/** The polling columns an order write sets (see {@link afterChange}). */
export type PollingColumns = Pick<OrderRow, 'next_poll_at' | 'poll_count'>;

/** What decides whether an order is settled. */
export type SettledFields = Pick<
  OrderRow,
  'status' | 'serial_number' | 'submission_state' | 'final_at' | 'stuck_at'
>;

/** What a recorded poll came to: an answer that changed the order or not, or no usable answer. */
export type PollOutcome = 'changed' | 'unchanged' | 'failed';

/** What recording a poll writes (see {@link planPollRecord}). */
export type PollRecord = Pick<
  OrderRow,
  'id' | 'last_polled_at' | 'poll_count' | 'next_poll_at' | 'stuck_at' | 'updated_at'
>;

/** Throws a RangeError naming the first setting that cannot make a schedule. */
export function checkScheduleSettings(settings: PollScheduleSettings): void {
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
 * Without its final state, or SUCCESS still without the serial number that may follow it: what
 * an order can be stuck in.
 */
function isIncomplete(row: Pick<OrderRow, 'final_at' | 'status' | 'serial_number'>): boolean {
  return row.final_at === null || (row.status === 'SUCCESS' && row.serial_number === null);
}

/**
 * True when due polling ends: FAILED, REFUNDED, or SUCCESS with its serial number
 * (decisions.md: a serial may follow a SUCCESS). A SUCCESS still without its serial is settled
 * once it is stuck: its outcome is final, and a late serial still applies when it comes. A
 * rejected or cancelled submission never existed upstream and is settled too. A SUCCESS may
 * still be refunded: the audit re-reads settled SUCCESS orders on idle capacity.
 */
export function isSettled(row: SettledFields): boolean {
  if (row.submission_state === 'rejected' || row.submission_state === 'cancelled') return true;
  if (row.status === null || !isFinalStatus(row.status)) return false;
  if (row.status !== 'SUCCESS') return true;
  return row.serial_number !== null || row.stuck_at !== null;
}

/**
 * When an order created or changed at `now` is first polled: when its final webhook is overdue
 * (docs/reconciler.md, "When the first poll comes"), as its upstream's plan of its product says
 * ({@link FirstPollPlan}): at its creation ({@link pollBaseOf}) + the learned quantile of the
 * product's time to a final state + the median webhook delivery delay, within the plan's bounds
 * from now; without a learned pace, the fixed delay from now.
 */
export function firstPollAt(row: FirstPollFields, now: number, firstPolls: FirstPollLookup): number {
  const { finalMs, deliveryMs, minMs, maxMs } = firstPolls(row);
  const overdueAt = Math.round(pollBaseOf(row, now) + finalMs + deliveryMs);
  return Math.min(Math.max(overdueAt, now + minMs), now + maxMs);
}

/**
 * The polling columns of an order the writer creates or applies a snapshot to (`current` is
 * null for a new order; `changed` says the snapshot moved it):
 * - settled → no next poll;
 * - queued → none either: the submission pump owns it until it has sent it;
 * - new or moved → first poll when its final webhook is overdue ({@link firstPollAt}), and the
 *   poll count restarts;
 * - otherwise (a duplicate or older event) the schedule stays as it was.
 */
export function afterChange(
  next: SettledFields & FirstPollFields & Pick<OrderRow, 'poll_count'>,
  current: Pick<OrderRow, 'next_poll_at'> | null,
  changed: boolean,
  now: number,
  firstPolls: FirstPollLookup,
): PollingColumns {
  if (isSettled(next)) return { next_poll_at: null, poll_count: next.poll_count };
  if (next.submission_state === 'queued') return { next_poll_at: null, poll_count: 0 };
  const first = firstPollAt(next, now, firstPolls);
  if (changed || current === null) return { next_poll_at: first, poll_count: 0 };
  return { next_poll_at: current.next_poll_at ?? first, poll_count: next.poll_count };
}

/**
 * The next poll of an order whose create call just ended without an order: none once the
 * submission is rejected; at once when its outcome is unknown, since only a poll can tell, or
 * when it is blocked (the reconciler submits it again once a probe shows the configuration
 * works, and takes it before the orders due after it).
 */
export function afterSubmissionOutcome(row: SettledFields, now: number): Pick<OrderRow, 'next_poll_at'> {
  return { next_poll_at: isSettled(row) ? null : now };
}

/**
 * Whether an order the upstream has, still without its final state, has been open longer than
 * its product's own learned outlier time (`FirstPollPlan.outlierMs`: with 95 % confidence, longer
 * than all but one in a thousand of its kind; pace-math.ts, `outlierBoundMs`). False without a
 * learned pace; false for a SUCCESS waiting for its serial, whose wait is not the time to final,
 * and for a submission still to be resolved, whose polls are not about the pace.
 */
function isOutlier(current: OrderRow, now: number, firstPolls: FirstPollLookup): boolean {
  if (current.final_at !== null || current.submission_state !== 'accepted') return false;
  // Only the product's own pace (outlierMs is null otherwise): every product's together says
  // little of a slow one.
  const { outlierMs } = firstPolls(current);
  return outlierMs !== null && now - pollBaseOf(current, now) > outlierMs;
}

/**
 * What recording a poll of `current` writes: `last_polled_at` (kept after a `failed` poll, as the
 * last time the upstream answered), the poll count (restarted by a change), and the next poll:
 * - settled → none;
 * - open longer than `stuckAfterMs` since its local creation without a final state → stuck
 *   (`stuck_at`, the first marking kept), polled at the longest backoff interval; a SUCCESS
 *   still without its serial is marked stuck the same way, and then settled;
 * - changed → at {@link firstPollAt};
 * - answered unchanged, open longer than its product's own learned outlier time
 *   (`PaceEstimate.outlierMs`, a confidence bound of the 99.9th percentile of its time to a
 *   final state; {@link isOutlier}) → at the longest backoff interval: the ladder's
 *   short steps are for the normal tail, and an order past nearly all of its kind (in practice,
 *   one PROCESSING for hours) would otherwise spend them for nothing;
 * - otherwise the n-th poll in a row without a change → after `backoffMs[n - 1]`, the last
 *   entry repeating.
 */
export function planPollRecord(
  settings: ScheduleRuleSettings,
  current: OrderRow,
  outcome: PollOutcome,
  now: number,
  firstPolls: FirstPollLookup,
): PollRecord {
  const { backoffMs, stuckAfterMs } = settings;
  const changed = outcome === 'changed';
  const stuck = isIncomplete(current) && now - current.local_created_at >= stuckAfterMs;
  const cap = Math.max(...backoffMs);
  const nextPollAt = stuck
    ? now + cap
    : changed
      ? firstPollAt(current, now, firstPolls)
      : outcome === 'unchanged' && isOutlier(current, now, firstPolls)
        ? now + cap
        : now + backoffMs[Math.min(current.poll_count, backoffMs.length - 1)]!;
  const stuckAt = stuck ? (current.stuck_at ?? now) : current.stuck_at;
  return {
    id: current.id,
    last_polled_at: outcome === 'failed' ? current.last_polled_at : now,
    poll_count: changed ? 0 : current.poll_count + 1,
    next_poll_at: isSettled({ ...current, stuck_at: stuckAt }) ? null : nextPollAt,
    stuck_at: stuckAt,
    updated_at: now,
  };
}
