/**
 * When a failed delivery is tried again: the n-th retry waits the n-th entry of the schedule
 * (H2H_NOTIFY_RETRY_S), plus up to {@link NOTIFY_JITTER} of it at random so that the retries of
 * many events to one endpoint that came back do not arrive together. The schedule is the least
 * wait: the default adds up to a little over three days.
 */

/** Default retry schedule, seconds: exponential to 12 h, then every 12 h, 3.6 days in all. */
export const DEFAULT_NOTIFY_RETRY_S = [
  5, 30, 120, 600, 1_800, 3_600, 7_200, 14_400, 28_800, 43_200, 43_200, 43_200, 43_200, 43_200, 43_200,
];

/** The largest share of a wait added at random. */
export const NOTIFY_JITTER = 0.2;

/** The wait before retry number `retry` (1 = the first retry), in ms. */
export function retryDelayMs(retry: number, scheduleMs: readonly number[], random = Math.random): number {
  const base = scheduleMs[Math.min(Math.max(retry, 1), scheduleMs.length) - 1] ?? 0;
  return Math.round(base * (1 + NOTIFY_JITTER * random()));
}
