import { isUtf8 } from 'node:buffer';
import type { JobsOptions } from 'bullmq';
import { DEFAULT_UPSTREAM } from '../upstream/model.js';
import { DEFAULT_PRIVATE_REDIS_PORT } from './defaults.js';
import { jobIdFor, scopedPrefix, sha256Hex } from './job-ids.js';
import { findOrderInWebhook, parseWebhookBody } from './webhook-order.js';

/**
 * The contract between the webhook receiver (producer) and the event worker (consumer): queue
 * name, job name, payload, job id rule and job options. docs/receiver.md, "Queue contract",
 * describes the same; change both together.
 */

/** Name of the BullMQ queue of verified webhook deliveries. */
export const WEBHOOK_QUEUE = 'h2h-webhooks';

/**
 * Name of a job on {@link WEBHOOK_QUEUE} whose body names no order or status (it may not even
 * be JSON). Other jobs are named `<order ref> <STATUS>` ({@link webhookJobName}) so that a person
 * finds an order's events by name in Bull Board; nothing reads the name back.
 */
export const UNPARSED_WEBHOOK_JOB_NAME = 'unparsed';

/** The Redis of the queues when none is given: the deployment's private one. */
export const DEFAULT_REDIS_URL = `redis://127.0.0.1:${DEFAULT_PRIVATE_REDIS_PORT}`;

/** BullMQ's own default key prefix; tests pass a unique one. Producer and worker must agree. */
export const DEFAULT_QUEUE_PREFIX = 'bull';

/** One verified webhook delivery, as the receiver queued it. */
export interface WebhookJobData {
  /**
   * What deliveries are deduplicated on: `event-id:<event_id of the signed body>` when the body
   * parses and has one, else `body-sha256:<lowercase hex SHA-256 of the raw body>`.
   */
  dedupeKey: string;
  /**
   * The `event_id` of the signed body, or null when it has none (jobs queued before
   * 2026-11-25 hold the `X-Event-Id` header here).
   */
  eventId: string | null;
  /** The `X-Event-Id` header as received (not covered by the signature), or null. */
  headerEventId?: string | null;
  /**
   * The body exactly as received, in {@link rawBodyEncoding}: `utf8` whenever the bytes are
   * valid UTF-8 (always, for a conforming sender), else `base64`. Decode with
   * {@link decodeWebhookRawBody}; it is not parsed or validated yet.
   */
  rawBody: string;
  rawBodyEncoding: 'utf8' | 'base64';
  /** `Date.now()` when the receiver accepted the delivery. */
  receivedAt: number;
  /**
   * The upstream whose secret signed it (docs/upstreams.md, "Webhooks"), when it is not the
   * default upstream; absent for the default's (and for every job queued before there were others).
   */
  upstream?: string;
  headers: {
    /** The verified signed timestamp (unix seconds). */
    timestamp: number;
    /** The event type header, when sent (`order.updated`). */
    eventType?: string;
  };
}

/** The dedupe key, job id and job name of a delivery. */
export interface WebhookIdentity {
  dedupeKey: string;
  jobId: string;
  /** The `event_id` of the body, or null when the body does not parse or has none. */
  eventId: string | null;
  /** `<order ref> <STATUS>`, or {@link UNPARSED_WEBHOOK_JOB_NAME}. */
  jobName: string;
}

function eventIdOf(body: unknown): string | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const id = (body as Record<string, unknown>).event_id;
  if (typeof id === 'string' && id !== '') return id;
  if (typeof id === 'number' && Number.isFinite(id)) return String(id);
  return null;
}

/** `<order ref> <STATUS>` of a parsed webhook body, or {@link UNPARSED_WEBHOOK_JOB_NAME}. */
function webhookJobName(body: unknown): string {
  const found = findOrderInWebhook(body);
  if (!found) return UNPARSED_WEBHOOK_JOB_NAME;
  const ref = found.partnerRef ?? found.invoiceNumber;
  const status = typeof found.order.status === 'string' ? found.order.status : '?';
  return `${ref} ${status}`.slice(0, 200);
}

/**
 * The dedupe rule of decisions.md: the `event_id` inside the signed body when the body parses
 * and has one, else the SHA-256 of the raw body. The `X-Event-Id` header is not covered by the
 * signature and plays no part (a replay under fresh header ids is still one event). The job id
 * is derived from the key (see {@link jobIdFor}): `ev-<event id>` (or `evh-<sha256 of the event
 * id>` for an id BullMQ could not take as is), or `body-<sha256 hex>`; for another upstream than
 * the default one the prefix carries its name ({@link scopedPrefix}: `ev@<name>@-…`).
 */
export function webhookIdentity(rawBody: Buffer, upstream: string = DEFAULT_UPSTREAM): WebhookIdentity {
  const parsed = parseWebhookBody(rawBody);
  const eventId = parsed.ok ? eventIdOf(parsed.body) : null;
  const jobName = parsed.ok ? webhookJobName(parsed.body) : UNPARSED_WEBHOOK_JOB_NAME;
  // Two suppliers' event ids are not one namespace: another upstream's job ids carry its name.
  if (eventId) {
    const jobId = jobIdFor(scopedPrefix('ev', upstream), eventId);
    return { dedupeKey: `event-id:${eventId}`, jobId, eventId, jobName };
  }
  const digest = sha256Hex(rawBody);
  return {
    dedupeKey: `body-sha256:${digest}`,
    jobId: `${scopedPrefix('body', upstream)}-${digest}`,
    eventId: null,
    jobName,
  };
}

/**
 * The key the store dedupes a webhook on, with its upstream (a (source, upstream, event id)
 * applies once, ever: two suppliers' event ids are not one namespace): the event id, else the
 * dedupe key.
 */
export function storedEventId(data: Pick<WebhookJobData, 'eventId' | 'dedupeKey'>): string {
  return data.eventId || data.dedupeKey;
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
