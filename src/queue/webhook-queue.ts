import { isUtf8 } from 'node:buffer';
import type { JobsOptions } from 'bullmq';
import { jobIdFor, sha256Hex } from './job-ids.js';

/**
 * The contract between the webhook receiver (producer) and the event worker (consumer): queue
 * name, job name, payload, job id rule and job options. docs/receiver.md, "Queue contract",
 * describes the same; change both together.
 */

/** Name of the BullMQ queue of verified webhook deliveries. */
export const WEBHOOK_QUEUE = 'h2h-webhooks';

/** Name of every job on {@link WEBHOOK_QUEUE}. */
export const WEBHOOK_JOB_NAME = 'webhook';

/** The Redis of the queues when none is given: a local one on its standard port. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** BullMQ's own default key prefix; tests pass a unique one. Producer and worker must agree. */
export const DEFAULT_QUEUE_PREFIX = 'bull';

/** One verified webhook delivery, as the receiver queued it. */
export interface WebhookJobData {
  /**
   * What deliveries are deduplicated on: `event-id:<X-Event-Id>` when the header was sent,
   * else `body-sha256:<lowercase hex SHA-256 of the raw body>`.
   */
  dedupeKey: string;
  /** The event id header as received, or null when the sender sent none. */
  eventId: string | null;
  /**
   * The body exactly as received, in {@link rawBodyEncoding}: `utf8` whenever the bytes are
   * valid UTF-8 (always, for a conforming sender), else `base64`. Decode with
   * {@link decodeWebhookRawBody}; it is not parsed or validated yet.
   */
  rawBody: string;
  rawBodyEncoding: 'utf8' | 'base64';
  /** `Date.now()` when the receiver accepted the delivery. */
  receivedAt: number;
  headers: {
    /** The verified signed timestamp (unix seconds). */
    timestamp: number;
    /** The event type header, when sent (`order.updated`). */
    eventType?: string;
  };
}

/** The dedupe key and job id of a delivery. */
export interface WebhookIdentity {
  dedupeKey: string;
  jobId: string;
}

/**
 * The dedupe rule of decisions.md: the event id header when present, else the SHA-256 of the
 * raw body. The job id is derived from it (see {@link jobIdFor}): `ev-<event id>` (or
 * `evh-<sha256 of the event id>` for an id BullMQ could not take as is), or `body-<sha256 hex>`.
 */
export function webhookIdentity(eventId: string | null, rawBody: Buffer): WebhookIdentity {
  if (eventId) return { dedupeKey: `event-id:${eventId}`, jobId: jobIdFor('ev', eventId) };
  const digest = sha256Hex(rawBody);
  return { dedupeKey: `body-sha256:${digest}`, jobId: `body-${digest}` };
}

/** Encodes raw body bytes for {@link WebhookJobData} without losing a byte. */
export function encodeWebhookRawBody(rawBody: Buffer): Pick<WebhookJobData, 'rawBody' | 'rawBodyEncoding'> {
  return isUtf8(rawBody)
    ? { rawBody: rawBody.toString('utf8'), rawBodyEncoding: 'utf8' }
    : { rawBody: rawBody.toString('base64'), rawBodyEncoding: 'base64' };
}

/** The exact bytes the receiver got. */
export function decodeWebhookRawBody(data: Pick<WebhookJobData, 'rawBody' | 'rawBodyEncoding'>): Buffer {
  return Buffer.from(data.rawBody, data.rawBodyEncoding === 'base64' ? 'base64' : 'utf8');
}

/** How long a completed webhook job is kept: 48 h, far beyond the sender's ~8.6 h of retries. */
export const WEBHOOK_COMPLETED_RETENTION_S = 48 * 3600;

/**
 * Upper bound on completed webhook jobs kept, so a burst cannot exhaust Redis memory (about
 * 1–2 KB each). At more than ~23,000 events per hour this cap, not the age, shortens the
 * window; `order_events` in the store dedupes beyond it.
 */
export const WEBHOOK_COMPLETED_RETENTION_COUNT = 200_000;

/**
 * Options of every webhook job. A custom job id dedupes only while the job is stored, hence the
 * deliberate retention of completed jobs. Failed jobs stay until someone handles them
 * (`h2h-sync events failed` / `retry`). Transient failures retry 10 times with exponential
 * backoff from 1 s (about 17 minutes in all); a job that can never apply should fail at once
 * with BullMQ's `UnrecoverableError`.
 */
export const WEBHOOK_JOB_OPTIONS = {
  attempts: 10,
  backoff: { type: 'exponential', delay: 1_000 },
  removeOnComplete: { age: WEBHOOK_COMPLETED_RETENTION_S, count: WEBHOOK_COMPLETED_RETENTION_COUNT },
  removeOnFail: false,
} as const satisfies JobsOptions;
