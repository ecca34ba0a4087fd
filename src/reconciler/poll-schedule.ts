import type { ReconcilerSettings } from '../config/config.js';
import type { LocalOrder } from '../store/local-order.js';

/** The parts of the reconciler settings that decide when an order is polled next. */
export type PollScheduleSettings = Pick<
  ReconcilerSettings,
  'firstPollDelayMs' | 'backoffMs' | 'stuckAfterMs'
>;

/** When to poll an order next, and whether it is stuck. */
export interface NextPoll {
  /** Delay from now, in ms. */
  delayMs: number;
  /** The order has been open for longer than `stuckAfterMs`: mark it and poll at the longest interval. */
  stuck: boolean;
}

/** Throws a RangeError naming the first setting that cannot make a schedule. */
export function checkPollSchedule(settings: PollScheduleSettings): void {
  const { firstPollDelayMs, backoffMs, stuckAfterMs } = settings;
  if (!Number.isFinite(firstPollDelayMs) || firstPollDelayMs < 0) {
    throw new RangeError(`firstPollDelayMs must be a number of ms ≥ 0, got ${firstPollDelayMs}`);
  }
  if (!Array.isArray(backoffMs) || backoffMs.length === 0 || backoffMs.some((ms) => !(ms > 0))) {
    throw new RangeError(`backoffMs must be one or more intervals > 0 ms, got ${JSON.stringify(backoffMs)}`);
  }
  if (!(stuckAfterMs > 0)) throw new RangeError(`stuckAfterMs must be > 0 ms, got ${stuckAfterMs}`);
}

/** The longest interval of the schedule: the cap, and the interval of stuck orders. */
export function longestIntervalMs(settings: Pick<ReconcilerSettings, 'backoffMs'>): number {
  return Math.max(...settings.backoffMs);
}

/**
 * The next poll of an order just polled (after its answer was applied):
 * - the answer changed it → `firstPollDelayMs`, as after a webhook: the next webhook is overdue then;
 * - otherwise the n-th poll in a row without a change (`pollsWithoutChange` before this one is
 *   n - 1) → `backoffMs[n - 1]`, the last entry repeating;
 * - not final yet, `stuckAfterMs` after it was created locally → stuck, at the longest interval
 *   (a SUCCESS waiting for its serial, or watched for a refund, has a final state: never stuck).
 */
export function nextPoll(
  order: Pick<LocalOrder, 'localCreatedAt' | 'pollCount' | 'finalAt'>,
  changed: boolean,
  now: number,
  settings: PollScheduleSettings,
): NextPoll {
  if (order.finalAt === null && now - order.localCreatedAt >= settings.stuckAfterMs) {
    return { delayMs: longestIntervalMs(settings), stuck: true };
  }
  if (changed) return { delayMs: settings.firstPollDelayMs, stuck: false };
  const { backoffMs } = settings;
  return { delayMs: backoffMs[Math.min(order.pollCount, backoffMs.length - 1)]!, stuck: false };
}
