import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { createBatchedJobAdder } from './job-batch.js';
import {
  POLL_REQUEST_JOB_NAME,
  POLL_REQUEST_JOB_OPTIONS,
  POLL_REQUEST_QUEUE,
  type PollRequestData,
  pollRequestJobId,
} from './poll-request-queue.js';
import {
  DEFAULT_QUEUE_PREFIX,
  DEFAULT_REDIS_URL,
  encodeWebhookRawBody,
  WEBHOOK_JOB_NAME,
  WEBHOOK_JOB_OPTIONS,
  WEBHOOK_QUEUE,
  type WebhookJobData,
  webhookIdentity,
} from './webhook-queue.js';

/** Default of {@link WebhookProducerOptions.enqueueTimeoutMs}. */
export const DEFAULT_ENQUEUE_TIMEOUT_MS = 2_000;

/** Default of {@link WebhookProducerOptions.maxBatchSize}. */
export const DEFAULT_MAX_BATCH_SIZE = 100;

/** Redis did not acknowledge in time, or refused: nothing can be promised about the add. */
export class QueueUnavailableError extends Error {
  override name = 'QueueUnavailableError';
  readonly code = 'QUEUE_UNAVAILABLE';
}

export interface WebhookProducerOptions {
  /** Redis to connect to. Default: {@link DEFAULT_REDIS_URL}. Ignored when `connection` is given. */
  redisUrl?: string;
  /**
   * An ioredis client to use instead of opening one; the caller keeps it (close() leaves it
   * open). Create it with `enableOfflineQueue: false` so that an outage fails at once.
   */
  connection?: Redis;
  /**
   * Longest wait for Redis to acknowledge one operation before it fails with
   * {@link QueueUnavailableError}. A frozen Redis accepts connections and never answers, so
   * this, not the connection, bounds the wait. Default: {@link DEFAULT_ENQUEUE_TIMEOUT_MS}.
   */
  enqueueTimeoutMs?: number;
  /** BullMQ key prefix; producer and worker must agree. Default: {@link DEFAULT_QUEUE_PREFIX}. */
  prefix?: string;
  /**
   * Most webhook jobs sent to Redis in one command. Adds requested in one turn of the event
   * loop go together; a turn with more is split, so that one command never keeps Redis busy
   * for long (about 25 µs of Redis time per job). Default: {@link DEFAULT_MAX_BATCH_SIZE}.
   */
  maxBatchSize?: number;
  /** Where connection loss and recovery are reported. Default: nowhere. */
  logger?: Logger;
}

/** A verified delivery to queue. */
export interface WebhookDeliveryInput {
  /** The body bytes exactly as received. */
  rawBody: Buffer;
  eventId: string | null;
  /** The verified signed timestamp (unix seconds). */
  timestamp: number;
  eventType?: string;
  /** Default: now. */
  receivedAt?: number;
}

/** What an add did. */
export interface EnqueueResult {
  jobId: string;
  /** True when a job with this id was already stored, so nothing was added. */
  duplicate: boolean;
}

/** How the webhook adds were grouped so far: commands sent, and the jobs they carried. */
export interface EnqueueBatchStats {
  batches: number;
  jobs: number;
}

/** Job counts of one queue by BullMQ state (`waiting`, `active`, `completed`, `failed`, …). */
export interface QueueJobCounts {
  queue: string;
  counts: Record<string, number>;
}

/** The receiver's side of the queues: adds that resolve only once Redis has the job. */
export interface WebhookProducer {
  readonly webhookQueue: Queue<WebhookJobData>;
  readonly pollQueue: Queue<PollRequestData>;
  /** The ioredis client both queues share. */
  readonly redis: Redis;
  /**
   * Adds a verified delivery under its dedupe job id. Resolves after Redis acknowledged it (or
   * found the job already stored); rejects with {@link QueueUnavailableError} otherwise. After
   * a timeout the add may still land later: a retried delivery then finds it as a duplicate.
   *
   * Adds requested in the same turn of the event loop are sent together, as one command (at
   * most `maxBatchSize` jobs), and each resolves once Redis has acknowledged that command; if
   * Redis refuses or does not answer it, every add of the batch rejects.
   */
  enqueueWebhook(delivery: WebhookDeliveryInput): Promise<EnqueueResult>;
  /** Batches and jobs sent by {@link enqueueWebhook} so far (for the metrics). */
  batchStats(): EnqueueBatchStats;
  /** Adds an early-poll request, one per order while pending; same guarantees. */
  requestPoll(request: PollRequestData): Promise<EnqueueResult>;
  /**
   * Resolves once the connection is up, the queues are initialised and Redis answers PING, all
   * within the timeout; rejects with {@link QueueUnavailableError} otherwise. Adds made before
   * the first connection is up are refused, so callers await this once at start.
   */
  ping(): Promise<void>;
  /** Job counts of both queues, within the timeout. */
  jobCounts(): Promise<QueueJobCounts[]>;
  /** Closes the queues, and the Redis client when this producer opened it. */
  close(): Promise<void>;
}

/** A webhook add waiting for the next batch. */
interface PendingWebhookAdd {
  jobId: string;
  data: WebhookJobData;
  resolve(result: EnqueueResult): void;
  reject(error: unknown): void;
}

/**
 * Races `work` against a deadline. Any failure (a refusal, a timeout) becomes a
 * {@link QueueUnavailableError} naming what was attempted.
 */
async function acknowledgedWithin<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  work.catch(() => {}); // it may settle after the deadline; nobody waits for it then
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new QueueUnavailableError(`Redis did not acknowledge ${what} within ${ms} ms`)),
      ms,
    );
  });
  try {
    return await Promise.race([work, deadline]);
  } catch (error) {
    if (error instanceof QueueUnavailableError) throw error;
    throw new QueueUnavailableError(`Redis refused ${what}: ${(error as Error).message}`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Opens the producer side of the webhook and poll-request queues on one ioredis connection
 * that fails fast: no offline queue (a command while disconnected is refused at once), one
 * retry per command, a command timeout, and a bounded wait on every operation.
 */
export function createWebhookProducer(options: WebhookProducerOptions = {}): WebhookProducer {
  const maxBatchSize = options.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE;
  if (!Number.isInteger(maxBatchSize) || maxBatchSize < 1) {
    throw new TypeError(
      `createWebhookProducer: maxBatchSize must be a positive integer (got ${maxBatchSize})`,
    );
  }
  const timeoutMs = options.enqueueTimeoutMs ?? DEFAULT_ENQUEUE_TIMEOUT_MS;
  const prefix = options.prefix ?? DEFAULT_QUEUE_PREFIX;
  const ownsConnection = options.connection === undefined;
  const redis =
    options.connection ??
    new Redis(options.redisUrl ?? DEFAULT_REDIS_URL, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: timeoutMs,
      connectTimeout: Math.max(timeoutMs, 1_000),
      connectionName: 'h2h-receiver',
    });

  // Report an outage once, not on every reconnect attempt, and its end.
  let down = false;
  const onError = (error: Error) => {
    if (down) return;
    down = true;
    options.logger?.warn({ err: error }, 'Redis unavailable; webhooks are answered 503 until it is back');
  };
  const onReady = () => {
    if (!down) return;
    down = false;
    options.logger?.info('Redis available again');
  };
  redis.on('error', onError);
  redis.on('ready', onReady);

  const webhookQueue = new Queue<WebhookJobData>(WEBHOOK_QUEUE, {
    connection: redis,
    prefix,
    defaultJobOptions: WEBHOOK_JOB_OPTIONS,
  });
  const pollQueue = new Queue<PollRequestData>(POLL_REQUEST_QUEUE, {
    connection: redis,
    prefix,
    defaultJobOptions: POLL_REQUEST_JOB_OPTIONS,
  });
  // Connection errors are already reported above; an 'error' event without a listener would crash.
  webhookQueue.on('error', () => {});
  pollQueue.on('error', () => {});

  /**
   * For the early-poll requests (rare: one per stale webhook). BullMQ's add answers the job id
   * whether or not the job existed. The EXISTS goes out just before the add on the same
   * connection, in the same round trip, so it tells which it was.
   */
  async function addOnce(jobKey: string, add: () => Promise<unknown>, jobId: string, what: string) {
    const existed = redis.exists(jobKey);
    const [exists] = await acknowledgedWithin(Promise.all([existed, add()]), timeoutMs, what);
    return { jobId, duplicate: exists === 1 };
  }

  // Webhook adds are coalesced: those requested during one turn of the event loop go to Redis
  // as one command (job-batch.ts), and each caller is answered once Redis has run it.
  const addWebhookJobs = createBatchedJobAdder(webhookQueue, redis, WEBHOOK_JOB_NAME);
  const stats: EnqueueBatchStats = { batches: 0, jobs: 0 };
  let pending: PendingWebhookAdd[] = [];
  const flushPending = () => {
    if (pending.length === 0) return;
    const batch = pending;
    pending = [];
    stats.batches += 1;
    stats.jobs += batch.length;
    const what = batch.length === 1 ? `webhook job ${batch[0]!.jobId}` : `${batch.length} webhook jobs`;
    acknowledgedWithin(addWebhookJobs(batch), timeoutMs, what).then(
      (results) => {
        results.forEach((result, i) => {
          const { resolve, reject } = batch[i]!;
          if (result.ok) resolve({ jobId: result.jobId, duplicate: result.existed });
          // This one job was refused (an id BullMQ cannot take): a bug, not an outage.
          else
            reject(
              new Error(`webhook job ${result.jobId} not queued: ${result.error.message}`, {
                cause: result.error,
              }),
            );
        });
      },
      // Nothing can be promised about any job of the batch: the sender retries each one, and a
      // job that did land is then found as a duplicate.
      (error: unknown) => {
        for (const { reject } of batch) reject(error);
      },
    );
  };

  return {
    webhookQueue,
    pollQueue,
    redis,
    enqueueWebhook(delivery) {
      const { dedupeKey, jobId } = webhookIdentity(delivery.eventId, delivery.rawBody);
      const data: WebhookJobData = {
        dedupeKey,
        eventId: delivery.eventId,
        ...encodeWebhookRawBody(delivery.rawBody),
        receivedAt: delivery.receivedAt ?? Date.now(),
        headers:
          delivery.eventType === undefined
            ? { timestamp: delivery.timestamp }
            : { timestamp: delivery.timestamp, eventType: delivery.eventType },
      };
      return new Promise<EnqueueResult>((resolve, reject) => {
        const queued = pending.push({ jobId, data, resolve, reject });
        // setImmediate runs after the I/O callbacks of this turn, so every request read in it joins.
        if (queued >= maxBatchSize) flushPending();
        else if (queued === 1) setImmediate(flushPending);
      });
    },
    batchStats: () => ({ ...stats }),
    requestPoll(request) {
      const jobId = pollRequestJobId(request);
      return addOnce(
        pollQueue.toKey(jobId),
        () => pollQueue.add(POLL_REQUEST_JOB_NAME, request, { jobId }),
        jobId,
        `poll request ${jobId}`,
      );
    },
    async ping() {
      const ready = async () => {
        await Promise.all([webhookQueue.waitUntilReady(), pollQueue.waitUntilReady()]);
        await redis.ping();
      };
      await acknowledgedWithin(ready(), timeoutMs, 'PING');
    },
    jobCounts() {
      return acknowledgedWithin(
        Promise.all(
          [webhookQueue, pollQueue].map(async (queue) => ({
            queue: queue.name,
            counts: await queue.getJobCounts(),
          })),
        ),
        timeoutMs,
        'job counts',
      );
    },
    async close() {
      await Promise.allSettled([webhookQueue.close(), pollQueue.close()]);
      redis.off('error', onError);
      redis.off('ready', onReady);
      if (!ownsConnection) return;
      redis.on('error', () => {}); // a late reconnect error must not crash the process
      try {
        await acknowledgedWithin(redis.quit(), timeoutMs, 'QUIT');
      } catch {
        redis.disconnect();
      }
    },
  };
}
