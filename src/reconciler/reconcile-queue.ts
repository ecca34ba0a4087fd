import type { JobsOptions } from 'bullmq';
import { DEFAULT_UPSTREAM, isDefaultUpstream } from '../upstream/model.js';

/** Name of the BullMQ queue of the default upstream's reconciliation passes ({@link reconcileNames}). */
export const RECONCILE_QUEUE = 'h2h-reconcile';

/** Name of every pass job. */
export const RECONCILE_JOB_NAME = 'reconcile-pass';

/** Id of the default upstream's job scheduler that adds a pass job every `RECONCILE_EVERY_S`; the same in every process. */
export const RECONCILE_SCHEDULER_ID = 'h2h-reconcile-every';

/**
 * Redis key of the default upstream's pass lock, the lease every pass takes (scheduled ones and
 * `h2h-sync reconcile --once`) so that one runs at a time; the same in every process and every
 * version, or two could run side by side during an upgrade.
 */
export const RECONCILE_PASS_LOCK_KEY = 'h2h:reconcile:pass-lock';

/** Deduplication id of the default upstream's follow-up pass, added when a pass ended with orders still due. */
export const RECONCILE_CONTINUE_ID = 'h2h-reconcile-continue';

/** The names one upstream's reconciler uses in Redis: its queue, job scheduler, pass lock and follow-up id. */
export interface ReconcileNames {
  queue: string;
  schedulerId: string;
  lockKey: string;
  continueId: string;
}

/**
 * The names of the reconciler of `upstream` (docs/reconciler.md, "Several upstreams"): the
 * default upstream's are today's, unchanged, so an upgrade leaves one scheduler and one lock;
 * another upstream's add `-<name>` (`:<name>` to the lock's key). BullMQ queue names must not
 * contain `:`, and an upstream's name is `a-z`, digits and `-` (upstreams.ts).
 */
export function reconcileNames(upstream: string = DEFAULT_UPSTREAM): ReconcileNames {
  if (isDefaultUpstream(upstream)) {
    return {
      queue: RECONCILE_QUEUE,
      schedulerId: RECONCILE_SCHEDULER_ID,
      lockKey: RECONCILE_PASS_LOCK_KEY,
      continueId: RECONCILE_CONTINUE_ID,
    };
  }
  return {
    queue: `${RECONCILE_QUEUE}-${upstream}`,
    schedulerId: `${RECONCILE_SCHEDULER_ID}-${upstream}`,
    lockKey: `${RECONCILE_PASS_LOCK_KEY}:${upstream}`,
    continueId: `${RECONCILE_CONTINUE_ID}-${upstream}`,
  };
}

/** What started a pass job. */
export interface ReconcileJobData {
  trigger: 'schedule' | 'continue';
}

/**
 * Pass jobs are not retried (the next pass comes anyway) and only the last 100 of each end are
 * kept, for `h2h-sync status` and inspection.
 */
export const RECONCILE_JOB_OPTIONS = {
  attempts: 1,
  removeOnComplete: { count: 100 },
  removeOnFail: { count: 100 },
} as const satisfies JobsOptions;
