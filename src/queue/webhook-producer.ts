import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { withDeadline } from '../shared/deadline.js';
import { createRedis } from '../shared/redis-client.js';
import { isDefaultUpstream } from '../upstream/model.js';
import { DEFAULT_ENQUEUE_TIMEOUT_MS, DEFAULT_REPLICA_ACK_TIMEOUT_MS } from './defaults.js';
import {
  POLL_REQUEST_JOB_NAME,
  POLL_REQUEST_JOB_OPTIONS,
  POLL_REQUEST_QUEUE,
  type PollRequestData,
  pollRequestJobId,
} from './poll-request-queue.js';
import { type QueueJobCounts, queueJobCounts } from './queue-depth.js';
import {
  DEFAULT_QUEUE_PREFIX,
  DEFAULT_REDIS_URL,
  encodeWebhookRawBody,
  WEBHOOK_JOB_OPTIONS,
  WEBHOOK_QUEUE,
  type WebhookJobData,
  webhookIdentity,
} from './webhook-queue.js';

/** Redis did not acknowledge in time, or refused: nothing can be promised about the add. */
export class QueueUnavailableError extends Error {
  override name = 'QueueUnavailableError';
  readonly code = 'QUEUE_UNAVAILABLE';
}

export interface WebhookProducerOptions {
  /** Redis to connect to. Default: {@link DEFAULT_REDIS_URL}. */
  redisUrl?: string;
  /**
   * Longest wait for Redis to acknowledge one operation before it fails with
   * {@link QueueUnavailableError}. A frozen Redis accepts connections and never answers, so
   * this, not the connection, bounds the wait. Default: {@link DEFAULT_ENQUEUE_TIMEOUT_MS}.
   */
  enqueueTimeoutMs?: number;
  /**
   * Replicas that must acknowledge a webhook job (Redis `WAIT`) before {@link
   * WebhookProducer.enqueueWebhook} resolves; fewer within `replicaAckTimeoutMs` is a
   * {@link QueueUnavailableError}. With replication being asynchronous, a job only the primary
   * holds is lost when a failover promotes a replica that had not received it. Default: 0 (no wait).
   */
  replicaAcks?: number;
  /**
   * The `WAIT` timeout; twice it below `enqueueTimeoutMs`, which bounds the command: a webhook
   * queued while a `WAIT` is out waits for that one, then for its own.
   * Default: {@link DEFAULT_REPLICA_ACK_TIMEOUT_MS}.
   */
  replicaAckTimeoutMs?: number;
  /** BullMQ key prefix; producer and worker must agree. Default: {@link DEFAULT_QUEUE_PREFIX}. */
  prefix?: string;
  /** Where connection loss and recovery are reported. Default: nowhere. */
  logger?: Logger;
}

/** A verified delivery to queue. */
export interface WebhookDeliveryInput {
  /** The body bytes exactly as received. */
  rawBody: Buffer;
  /** The `X-Event-Id` header, or null: kept for diagnosis and cross-checked, never keyed on. */
  headerEventId: string | null;
  /** The verified signed timestamp (unix seconds). */
  timestamp: number;
  eventType?: string;
  /** Default: now. */
  receivedAt?: number;
  /** The upstream whose secret signed it. Default: the default upstream. */
  upstream?: string;
}

/** What an add did. */
export interface EnqueueResult {
  jobId: string;
  /** True when a job with this id was already stored, so nothing was added. */
  duplicate: boolean;
}

/** What adding a webhook did, and what the delivery was identified by. */
export interface WebhookEnqueueResult extends EnqueueResult {
  /** The `event_id` of the signed body, or null. */
  eventId: string | null;
  /** True when both the header and the body name an event id and they differ. */
  eventIdMismatch: boolean;
}

/** The receiver's side of the queues: adds that resolve only once Redis has the job. */
export interface WebhookProducer {
  readonly webhookQueue: Queue<WebhookJobData>;
  readonly pollQueue: Queue<PollRequestData>;
  /** The ioredis client both queues share (a plain connection: see {@link createWebhookProducer}). */
  readonly redis: Redis;
  /**
   * Adds a verified delivery under its dedupe job id with `queue.add`. Resolves after Redis
   * acknowledged it (or found the job already stored), and `replicaAcks` replicas with it (a
   * `WAIT` on the same connection as the add: one cut by a reconnect proves nothing); rejects
   * with {@link QueueUnavailableError} otherwise. After a timeout the add may still land
   * later: a retried delivery then finds it as a duplicate.
   */
  enqueueWebhook(delivery: WebhookDeliveryInput): Promise<WebhookEnqueueResult>;
  /** Adds an early-poll request, one per order while pending; same guarantees. */
  requestPoll(request: PollRequestData): Promise<EnqueueResult>;
  /**
   * Resolves once the connection is up, the queues are initialised and Redis answers PING, all
   * within the timeout; rejects with {@link QueueUnavailableError} otherwise. Adds made before
   * the first connection is up are refused, so callers await this once at start.
   */
  ping(): Promise<void>;
  /**
   * What `/readyz` asks: {@link ping}, and with `replicaAcks` set, that as many replicas are in
   * sync with the primary (`INFO replication`: `state=online`); rejects with a
   * {@link QueueUnavailableError} that says which is missing. Without them every webhook is
   * refused, so the receiver is not ready.
   */
  ready(): Promise<void>;
  /** Job counts of both queues by state, within the timeout. */
  jobCounts(): Promise<QueueJobCounts[]>;
  /** Closes the queues and the Redis client. */
  close(): Promise<void>;
}

/**
 * Waits for `work` at most `ms`. Any failure (a refusal, a timeout) becomes a
 * {@link QueueUnavailableError} naming what was attempted.
 */
async function acknowledgedWithin<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  try {
    return await withDeadline(
      work,
      ms,
      () => new QueueUnavailableError(`Redis did not acknowledge ${what} within ${ms} ms`),
    );
  } catch (error) {
    if (error instanceof QueueUnavailableError) throw error;
    throw new QueueUnavailableError(`Redis refused ${what}: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * `WAIT replicas timeoutMs` on `redis`, shared by callers as a group commit. Redis runs one
 * connection's commands in order, so a `WAIT` sent after a caller's write was answered covers
 * that write; one already sent may not. A caller with no `WAIT` on the wire sends one; callers
 * that arrive while one is out share the next, sent when it returns. (A `WAIT` also holds the
 * connection's later commands until it returns, so one at a time costs nothing more.) On a
 * duplicate, BullMQ's add still writes a `duplicated` event, so the offset the `WAIT` waits for
 * is past the job's own write, even one another receiver process made.
 */
function replicaBarrier(redis: Redis, replicas: number, timeoutMs: number): () => Promise<number> {
  let sent: Promise<number> | undefined;
  let next: Promise<number> | undefined;
  const send = (): Promise<number> => {
    const acks = redis.wait(replicas, timeoutMs);
    sent = acks;
    const clear = () => {
      if (sent === acks) sent = undefined;
    };
    acks.then(clear, clear);
    return acks;
  };
  const sendNext = () => {
    next = undefined;
    return send();
  };
  return () => {
    if (!sent) return send();
    next ??= sent.then(sendNext, sendNext);
    return next;
  };
}

/**
 * Opens the producer side of the webhook and poll-request queues on one ioredis connection
 * that fails fast: no offline queue (a command while disconnected is refused at once), one
 * retry per command, a command timeout, and a bounded wait on every operation.
 *
 * The connection does not auto-pipeline (`enableAutoPipelining`): ioredis keeps one automatic
 * pipeline in flight per connection, so a webhook read while one is out waited for its whole
 * round trip; measured side by side, a plain connection answered with a lower p99 at a higher
 * rate (docs/performance.md, "Receiver").
 */
export function createWebhookProducer(options: WebhookProducerOptions = {}): WebhookProducer {
  const timeoutMs = options.enqueueTimeoutMs ?? DEFAULT_ENQUEUE_TIMEOUT_MS;
  const prefix = options.prefix ?? DEFAULT_QUEUE_PREFIX;
  const replicaAcks = options.replicaAcks ?? 0;
  const replicaAckTimeoutMs = options.replicaAckTimeoutMs ?? DEFAULT_REPLICA_ACK_TIMEOUT_MS;
  if (!Number.isInteger(replicaAcks) || replicaAcks < 0) {
    throw new RangeError(`replicaAcks must be a whole number ≥ 0, got ${replicaAcks}`);
  }
  if (replicaAcks > 0 && 2 * replicaAckTimeoutMs >= timeoutMs) {
    throw new RangeError(
      `twice replicaAckTimeoutMs (${replicaAckTimeoutMs}) must be below enqueueTimeoutMs (${timeoutMs}), which bounds the two WAITs a webhook may wait for (replicaBarrier)`,
    );
  }
  const redis = createRedis(options.redisUrl ?? DEFAULT_REDIS_URL, {
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
  // Counts the connection's closes. A `WAIT` proves something about the writes made on the
  // connection that carries it: after a reconnect (ioredis resends a `WAIT` left unanswered, and
  // a failover may have put another server behind the address) it says nothing of a job added
  // before, so a webhook whose add and `WAIT` saw different connections is refused.
  let closes = 0;
  redis.on('close', () => {
    closes++;
  });

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

  const replicated = replicaBarrier(redis, replicaAcks, replicaAckTimeoutMs);

  /** The add of each job key in flight, so that a second add of the same job can wait for it. */
  const inFlight = new Map<string, Promise<EnqueueResult>>();

  /**
   * Adds a job under its custom id with `add` and tells whether it was a duplicate. BullMQ's
   * add answers the job id whether or not the job existed; an `EXISTS` of the job's key
   * (`queue.toKey(jobId)`, public API) issued just before it on the same connection tells which
   * it was, since Redis runs one connection's commands in order. Two adds of one job in this
   * process never interleave: the second waits for the first, so exactly one of them reads
   * false. (Adds of one job from two receiver processes may both read false; BullMQ still stores
   * one job.)
   */
  function addOnce(
    queue: Queue<WebhookJobData> | Queue<PollRequestData>,
    jobId: string,
    add: () => Promise<unknown>,
    what: string,
  ): Promise<EnqueueResult> {
    const jobKey = queue.toKey(jobId);
    const send = async (): Promise<EnqueueResult> => {
      const [exists] = await Promise.all([redis.exists(jobKey), add()]);
      return { jobId, duplicate: exists === 1 };
    };
    const previous = inFlight.get(jobKey);
    const added = previous ? previous.then(send, send) : send();
    inFlight.set(jobKey, added);
    const forget = () => {
      if (inFlight.get(jobKey) === added) inFlight.delete(jobKey);
    };
    added.then(forget, forget);
    return acknowledgedWithin(added, timeoutMs, what);
  }

  const ping = async () => {
    const up = async () => {
      await Promise.all([webhookQueue.waitUntilReady(), pollQueue.waitUntilReady()]);
      await redis.ping();
    };
    await acknowledgedWithin(up(), timeoutMs, 'PING');
  };
  return {
    webhookQueue,
    pollQueue,
    redis,
    async enqueueWebhook(delivery) {
      const closesAtAdd = closes;
      const { dedupeKey, jobId, eventId, jobName } = webhookIdentity(delivery.rawBody, delivery.upstream);
      const { headerEventId, upstream } = delivery;
      const data: WebhookJobData = {
        dedupeKey,
        eventId,
        headerEventId,
        ...encodeWebhookRawBody(delivery.rawBody),
        receivedAt: delivery.receivedAt ?? Date.now(),
        headers:
          delivery.eventType === undefined
            ? { timestamp: delivery.timestamp }
            : { timestamp: delivery.timestamp, eventType: delivery.eventType },
        ...(isDefaultUpstream(upstream) ? {} : { upstream }),
      };
      const added = await addOnce(
        webhookQueue,
        jobId,
        () => webhookQueue.add(jobName, data, { jobId }),
        `webhook job ${jobId}`,
      );
      if (replicaAcks > 0) {
        // A duplicate waits too: the first add may have been answered 503 before its replicas had it.
        const acks = await acknowledgedWithin(replicated(), timeoutMs, `WAIT for webhook job ${jobId}`);
        if (closes !== closesAtAdd) {
          throw new QueueUnavailableError(
            `the connection to Redis was replaced between the add of webhook job ${jobId} and its WAIT, so no replica is known to hold it`,
          );
        }
        if (acks < replicaAcks) {
          throw new QueueUnavailableError(
            `webhook job ${jobId} is on the primary but ${acks} of ${replicaAcks} replicas acknowledged it within ${replicaAckTimeoutMs} ms`,
          );
        }
      }
      const eventIdMismatch = headerEventId !== null && eventId !== null && headerEventId !== eventId;
      return { ...added, eventId, eventIdMismatch };
    },
    requestPoll(request) {
      const jobId = pollRequestJobId(request);
      return addOnce(
        pollQueue,
        jobId,
        () => pollQueue.add(POLL_REQUEST_JOB_NAME, request, { jobId }),
        `poll request ${jobId}`,
      );
    },
    ping,
    async ready() {
      await ping();
      if (replicaAcks === 0) return;
      const info = await acknowledgedWithin(redis.info('replication'), timeoutMs, 'INFO replication');
      const online = info.split('\n').filter((line) => /^slave\d+:.*\bstate=online\b/.test(line)).length;
      if (online < replicaAcks) {
        throw new QueueUnavailableError(
          `${online} replica(s) in sync with the Redis primary, H2H_RECEIVER_REPLICA_ACKS asks for ${replicaAcks}: every webhook is refused until one is back`,
        );
      }
    },
    jobCounts() {
      return acknowledgedWithin(queueJobCounts([webhookQueue, pollQueue]), timeoutMs, 'job counts');
    },
    async close() {
      await Promise.allSettled([webhookQueue.close(), pollQueue.close()]);
      redis.off('error', onError);
      redis.off('ready', onReady);
      redis.on('error', () => {}); // a late reconnect error must not crash the process
      try {
        await acknowledgedWithin(redis.quit(), timeoutMs, 'QUIT');
      } catch {
        redis.disconnect();
      }
    },
  };
}
