/**
 * The event worker's defaults, in a module that imports nothing: the config schema names them
 * without loading BullMQ and ioredis.
 */

/** Default of `EventWorkerOptions.concurrency`. */
export const DEFAULT_WORKER_CONCURRENCY = 100;
/** Default of `EventWorkerOptions.lockDurationMs` (BullMQ's own). */
export const DEFAULT_LOCK_DURATION_MS = 30_000;
/** Default of `EventWorkerOptions.stalledIntervalMs` (BullMQ's own). */
export const DEFAULT_STALLED_INTERVAL_MS = 30_000;
/** Default of `EventWorkerOptions.maxStalledCount` (BullMQ's own). */
export const DEFAULT_MAX_STALLED_COUNT = 1;
/** Default of `EventWorkerOptions.storeLockWaitMs`. */
export const DEFAULT_STORE_LOCK_WAIT_MS = 5_000;
