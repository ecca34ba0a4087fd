import { z } from 'zod';
import { int, type SharedSettings } from '../config/variables.js';
import { DEFAULT_SHUTDOWN_TIMEOUT_MS } from '../shared/defaults.js';
import {
  DEFAULT_LOCK_DURATION_MS,
  DEFAULT_MAX_STALLED_COUNT,
  DEFAULT_STALLED_INTERVAL_MS,
  DEFAULT_STORE_LOCK_WAIT_MS,
  DEFAULT_WORKER_CONCURRENCY,
} from './defaults.js';

/** The event worker's variables (README, "Settings"). */
export const workerVariables = z.object({
  H2H_WORKER_CONCURRENCY: int(1)
    .default(DEFAULT_WORKER_CONCURRENCY)
    .describe(
      'Webhook jobs one event worker process holds at once; they share group commits, so also the most events one commit holds.',
    ),
  H2H_WORKER_BATCH_SIZE: int(1)
    .optional()
    .describe(
      'Events at which the worker commits a batch without waiting for the next event-loop turn. Default and maximum: `H2H_WORKER_CONCURRENCY`.',
    ),
  H2H_WORKER_LOCK_DURATION_MS: int(1)
    .default(DEFAULT_LOCK_DURATION_MS)
    .describe(
      'How long a webhook job stays locked to its worker without a renewal; a crashed worker’s jobs are taken over after it.',
    ),
  H2H_WORKER_STALLED_INTERVAL_MS: int(1)
    .default(DEFAULT_STALLED_INTERVAL_MS)
    .describe('How often a worker returns stalled jobs (their lock expired: the worker died) to the queue.'),
  H2H_WORKER_MAX_STALLED_COUNT: int(0)
    .default(DEFAULT_MAX_STALLED_COUNT)
    .describe('Times a webhook job may stall and be taken over before it is parked in the failed set.'),
  H2H_WORKER_STORE_LOCK_WAIT_MS: int(1)
    .default(DEFAULT_STORE_LOCK_WAIT_MS)
    .describe(
      'Longest wait of the event worker for another process’s write lock on the store, on timers (its event loop keeps renewing job locks); past it the batch’s jobs are retried by BullMQ.',
    ),
  H2H_FEED_RETENTION_D: int(1)
    .default(30)
    .describe(
      'Days the change feed keeps an event (docs/api.md, "The change feed"): a shop that was away longer reads the orders themselves instead. The worker prunes older ones every hour.',
    ),
  H2H_HISTORY_RETENTION_D: int(0)
    .default(0)
    .describe(
      'Days a final order keeps its history (events and notification records) after its last change; 0: for ever. The order itself stays. At least `H2H_FEED_RETENTION_D` when set. The worker prunes every hour, in small batches (docs/store.md, "History retention").',
    ),
  H2H_WORKER_SHUTDOWN_TIMEOUT_MS: int(1)
    .default(DEFAULT_SHUTDOWN_TIMEOUT_MS)
    .describe(
      'Longest graceful stop of the worker on SIGINT/SIGTERM (finish and commit active jobs) before it exits anyway.',
    ),
});

/** The event worker's section (docs/worker.md). */
export function workerSettings(config: SharedSettings & { settings: z.output<typeof workerVariables> }) {
  const s = config.settings;
  return {
    redisUrl: config.redisUrl,
    dbUrl: config.dbUrl,
    dbLockTimeoutMs: config.dbLockTimeoutMs,
    dbPoolMax: config.dbPoolMax,
    concurrency: s.H2H_WORKER_CONCURRENCY,
    // Each job in flight waits for its batch's commit, so a larger batch could never fill.
    batchSize: Math.min(s.H2H_WORKER_BATCH_SIZE ?? s.H2H_WORKER_CONCURRENCY, s.H2H_WORKER_CONCURRENCY),
    lockDurationMs: s.H2H_WORKER_LOCK_DURATION_MS,
    stalledIntervalMs: s.H2H_WORKER_STALLED_INTERVAL_MS,
    maxStalledCount: s.H2H_WORKER_MAX_STALLED_COUNT,
    storeLockWaitMs: s.H2H_WORKER_STORE_LOCK_WAIT_MS,
    shutdownTimeoutMs: s.H2H_WORKER_SHUTDOWN_TIMEOUT_MS,
    feedRetentionMs: s.H2H_FEED_RETENTION_D * 86_400_000,
    /** 0: the history is kept for ever. */
    historyRetentionMs: s.H2H_HISTORY_RETENTION_D * 86_400_000,
    logLevel: config.logLevel,
    logFormat: config.logFormat,
  };
}
export type WorkerSettings = ReturnType<typeof workerSettings>;
