import type { JobsOptions } from 'bullmq';

/** Name of the BullMQ queue of reconciliation passes. */
export const RECONCILE_QUEUE = 'h2h-reconcile';

/** Name of every pass job. */
export const RECONCILE_JOB_NAME = 'reconcile-pass';

/** Id of the job scheduler that adds a pass job every `RECONCILE_EVERY_S`; the same in every process. */
export const RECONCILE_SCHEDULER_ID = 'h2h-reconcile-every';

/**
 * Redis key of the pass lock, the lease every pass takes (scheduled ones and
 * `h2h-sync reconcile --once`) so that one runs at a time; the same in every process and every
 * version, or two could run side by side during an upgrade.
 */
export const RECONCILE_PASS_LOCK_KEY = 'h2h:reconcile:pass-lock';

/** Deduplication id of the follow-up pass added when a pass ended with orders still due. */
export const RECONCILE_CONTINUE_ID = 'h2h-reconcile-continue';

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
