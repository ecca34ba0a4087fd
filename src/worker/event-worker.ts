import { type Job, UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import {
  DEFAULT_QUEUE_PREFIX,
  DEFAULT_REDIS_URL,
  WEBHOOK_QUEUE,
  type WebhookJobData,
} from '../queue/webhook-queue.js';
import { settlesWithin } from '../shared/deadline.js';
import { DEFAULT_SHUTDOWN_TIMEOUT_MS } from '../shared/defaults.js';
import { GroupCommit, type GroupCommitStats } from '../shared/group-commit.js';
import { watchedRedis } from '../shared/redis-outage.js';
import type { EventReason } from '../store/local-order.js';
import type { ApplyItem, ApplyResult, OrderWriter } from '../store/order-writer.js';
import { StoreError } from '../store/store-error.js';
import {
  DEFAULT_LOCK_DURATION_MS,
  DEFAULT_MAX_STALLED_COUNT,
  DEFAULT_STALLED_INTERVAL_MS,
  DEFAULT_STORE_LOCK_WAIT_MS,
  DEFAULT_WORKER_CONCURRENCY,
} from './defaults.js';
import { ParkedEventError, readWebhookJob } from './webhook-event.js';

export interface EventWorkerOptions {
  /** The order store's writer; every event is applied by its `applyBatch`, in group commits (see {@link GroupCommit}). */
  writer: OrderWriter;
  /** Redis of the queue. Default: {@link DEFAULT_REDIS_URL}. */
  redisUrl?: string;
  /** BullMQ key prefix; must match the receiver's. Default: {@link DEFAULT_QUEUE_PREFIX}. */
  prefix?: string;
  /**
   * Jobs this process holds at once. It bounds the group commit too: a batch holds at most
   * this many events, since each job waits for its commit. Default: {@link DEFAULT_WORKER_CONCURRENCY}.
   */
  concurrency?: number;
  /**
   * A batch commits as soon as it holds this many events, else on the next turn of the event
   * loop. Default: the concurrency.
   */
  maxBatchSize?: number;
  /**
   * How long a job stays locked to this worker without a renewal (renewed every half of it
   * while the process lives). After a crash its jobs are taken over once the lock has expired
   * and a stalled check has seen them. Default: {@link DEFAULT_LOCK_DURATION_MS}.
   */
  lockDurationMs?: number;
  /** Interval of the check that returns stalled jobs to the queue. Default: {@link DEFAULT_STALLED_INTERVAL_MS}. */
  stalledIntervalMs?: number;
  /**
   * Times a job may be recovered from a stalled state before it is failed ("job stalled more
   * than allowable limit"; listed by `events failed`). Default: {@link DEFAULT_MAX_STALLED_COUNT}.
   */
  maxStalledCount?: number;
  /**
   * Longest wait for another process's write lock on the store, spent on timers so that the
   * event loop keeps renewing job locks (a synchronous wait would let them expire: jobs reported
   * stalled, and parked after `maxStalledCount`). Past it the batch's jobs fail and BullMQ
   * retries them. Default: {@link DEFAULT_STORE_LOCK_WAIT_MS}.
   */
  storeLockWaitMs?: number;
  /** Start taking jobs at once. Default: `true`. */
  autorun?: boolean;
  /** Where failures and Redis trouble are reported. Default: nowhere. */
  logger?: Logger;
}

/** What a completed webhook job returns (kept with the job while it is retained). */
export interface EventOutcome {
  partnerRef: string;
  status: string | null;
  changed: boolean;
  reason: EventReason;
  duplicate: boolean;
  created: boolean;
}

/** A running event worker. */
export interface EventWorker {
  readonly worker: Worker<WebhookJobData, EventOutcome>;
  /** Group-commit figures: commits, events committed and failed, largest batch. */
  stats(): GroupCommitStats;
  /** Resolves once the worker is connected and taking jobs. */
  waitUntilReady(): Promise<void>;
  /**
   * Stops taking jobs, lets the active ones finish (their batch commits and they are marked
   * completed), and closes the Redis connection; resolves to `true`. When that has not happened
   * within `timeoutMs` (default {@link DEFAULT_SHUTDOWN_TIMEOUT_MS}; Redis unreachable: BullMQ's
   * close has no timeout of its own), it stops waiting and resolves to `false`: jobs whose
   * completion never reached Redis are taken over as stalled later and apply as duplicates.
   * Does not close the database. Safe to call twice.
   */
  close(options?: { timeoutMs?: number }): Promise<boolean>;
}

/** A store error that no retry can fix becomes a parked event; anything else may be transient. */
function classify(error: unknown): unknown {
  if (error instanceof StoreError && error.code === 'INVALID_SNAPSHOT') {
    return new ParkedEventError('INVALID_SNAPSHOT', error.message);
  }
  return error;
}

function positiveInt(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1)
    throw new RangeError(`${name} must be a whole number ≥ 1, got ${value}`);
  return value;
}

/** The event worker's group commit: snapshots in, apply results out. */
export type ApplyCommit = GroupCommit<ApplyItem, ApplyResult>;

/** The event worker's group commit on `writer` (its `applyBatch`), waiting up to `lockTimeoutMs` for the write lock. */
export function applyCommit(
  writer: OrderWriter,
  { maxBatchSize, lockTimeoutMs }: { maxBatchSize?: number; lockTimeoutMs?: number } = {},
): ApplyCommit {
  return new GroupCommit<ApplyItem, ApplyResult>({
    runBatch: (items) => writer.applyBatch(items, lockTimeoutMs === undefined ? {} : { lockTimeoutMs }),
    ...(maxBatchSize === undefined ? {} : { maxBatchSize }),
  });
}

/**
 * The worker's apply path for one job, without BullMQ: reads the job ({@link readWebhookJob}),
 * applies its order in the next group commit (`writer.applyBatch`), and resolves once
 * that commit is durable. Rejects with a {@link ParkedEventError} for an event that can never
 * apply, or with the error as thrown (SQLITE_BUSY, I/O) when a retry may succeed.
 */
export async function applyWebhookJob(data: unknown, groupCommit: ApplyCommit): Promise<EventOutcome> {
  const event = readWebhookJob(data);
  try {
    const result = await groupCommit.submit({ snapshot: event.order, options: event.options });
    return {
      partnerRef: result.order.partnerRef,
      status: result.order.status,
      changed: result.changed,
      reason: result.reason,
      duplicate: result.duplicate,
      created: result.created,
    };
  } catch (error) {
    throw classify(error);
  }
}

/**
 * The event worker (docs/worker.md): a BullMQ worker on {@link WEBHOOK_QUEUE} that applies each
 * verified webhook to the order store (source `webhook`) through `OrderWriter.applyBatch`, the
 * group commit's form of `applyOrderSnapshot`.
 *
 * - Jobs are applied by group commit: the jobs in flight share one SQLite transaction, each in
 *   its own savepoint, and a job completes only after that transaction has committed.
 * - An event that can never apply fails at once with a {@link ParkedEventError} (an
 *   `UnrecoverableError`) and stays in the failed set. Any other error (SQLITE_BUSY after the
 *   busy timeout, I/O) is thrown as is, so BullMQ retries it with the job's backoff.
 * - After a crash, the jobs it held are recovered as stalled by another worker; the store's
 *   (source, event id) dedupe makes applying one twice harmless.
 */
export function createEventWorker(options: EventWorkerOptions): EventWorker {
  // Every option is checked before anything connects: a wrong one throws here, and leaks nothing.
  const concurrency = positiveInt('concurrency', options.concurrency ?? DEFAULT_WORKER_CONCURRENCY);
  const maxBatchSize = positiveInt('maxBatchSize', options.maxBatchSize ?? concurrency);
  const lockDuration = positiveInt('lockDurationMs', options.lockDurationMs ?? DEFAULT_LOCK_DURATION_MS);
  const stalledInterval = positiveInt(
    'stalledIntervalMs',
    options.stalledIntervalMs ?? DEFAULT_STALLED_INTERVAL_MS,
  );
  const maxStalledCount = options.maxStalledCount ?? DEFAULT_MAX_STALLED_COUNT;
  if (!Number.isInteger(maxStalledCount) || maxStalledCount < 0) {
    throw new RangeError(`maxStalledCount must be a whole number ≥ 0, got ${maxStalledCount}`);
  }
  const groupCommit = applyCommit(options.writer, {
    maxBatchSize,
    lockTimeoutMs: options.storeLockWaitMs ?? DEFAULT_STORE_LOCK_WAIT_MS,
  });
  const { logger } = options;

  const redisUrl = options.redisUrl ?? DEFAULT_REDIS_URL;
  const { connection, outage } = watchedRedis({
    url: redisUrl,
    component: 'event worker',
    logger,
    // BullMQ workers must wait out a Redis outage, not fail commands
    redis: { maxRetriesPerRequest: null, connectionName: 'h2h-worker' },
  });

  const processor = (job: Job<WebhookJobData, EventOutcome>): Promise<EventOutcome> =>
    applyWebhookJob(job.data, groupCommit);

  const worker = new Worker<WebhookJobData, EventOutcome>(WEBHOOK_QUEUE, processor, {
    connection,
    prefix: options.prefix ?? DEFAULT_QUEUE_PREFIX,
    concurrency,
    lockDuration,
    stalledInterval,
    maxStalledCount,
    autorun: options.autorun ?? true,
  });

  worker.on('failed', (job, error) => {
    if (!job) return;
    const parked = error instanceof UnrecoverableError || job.attemptsMade >= (job.opts.attempts ?? 1);
    const fields = {
      jobId: job.id,
      eventId: job.data?.eventId,
      attempts: job.attemptsMade,
      reason: error.message,
    };
    if (parked) logger?.warn(fields, 'webhook event parked in the failed set');
    else logger?.info(fields, 'webhook event failed; BullMQ retries it with backoff');
  });
  worker.on('stalled', (jobId) => logger?.warn({ jobId }, 'webhook job stalled; back in the queue'));
  // Without a listener an 'error' event would crash the process; BullMQ reconnects by itself.
  // Its blocking connection reports here too.
  worker.on('error', outage.error);

  let closing: Promise<boolean> | undefined;
  return {
    worker,
    stats: () => groupCommit.stats,
    waitUntilReady: () => worker.waitUntilReady(),
    close({ timeoutMs = DEFAULT_SHUTDOWN_TIMEOUT_MS } = {}) {
      closing ??= (async () => {
        const closed = worker.close();
        try {
          if (await settlesWithin(closed, timeoutMs)) {
            await closed;
            return true;
          }
          logger?.error(
            { timeoutMs },
            'event worker did not close in time; leaving its jobs to stall recovery',
          );
          void worker.close(true).catch(() => {});
          return false;
        } finally {
          // Whatever is still queued in the batch runs now, before the caller closes the database.
          await groupCommit.drain();
          connection.disconnect();
        }
      })();
      return closing;
    },
  };
}
