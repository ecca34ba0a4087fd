import { isUtf8 } from 'node:buffer';
import { UnrecoverableError } from 'bullmq';
import { findOrderInWebhook, parseWebhookBody } from '../queue/webhook-order.js';
import { decodeWebhookRawBody, storedEventId, type WebhookJobData } from '../queue/webhook-queue.js';
import type { ApplyOptions } from '../store/order-writer.js';
import { DEFAULT_UPSTREAM, type Order } from '../upstream/model.js';
import { parseUpstreamTime } from '../upstream/upstream-time.js';

/**
 * Why a webhook event can never apply. Each is a permanent verdict about the job's bytes, so
 * retrying would fail the same way: the job is parked in the failed set at once.
 * - `INVALID_JOB`: the job's data is not a {@link WebhookJobData} (not written by the receiver);
 * - `NOT_UTF8`: the body bytes are not UTF-8, so they are not the JSON decisions.md promises;
 * - `UNPARSEABLE_BODY`: the body is not JSON;
 * - `NO_ORDER`: no object with a `partner_ref` or `invoice_number` under `data`, `order` or the top level;
 * - `INVALID_SNAPSHOT`: the store refused the order (no status, or an unknown order without a partner_ref).
 */
export type ParkedReason = 'INVALID_JOB' | 'NOT_UTF8' | 'UNPARSEABLE_BODY' | 'NO_ORDER' | 'INVALID_SNAPSHOT';

/**
 * A webhook event that can never apply. It is a BullMQ `UnrecoverableError`, so the job fails
 * at once, whatever attempts it has left, and stays in the failed set for
 * `h2h-sync events failed`. The message (the job's `failedReason`) starts with the code.
 */
export class ParkedEventError extends UnrecoverableError {
  constructor(
    readonly code: ParkedReason,
    detail: string,
  ) {
    super(`${code}: ${detail}`);
  }
}

/** A webhook job read and checked: what to hand to the store writer's `applyOrderSnapshot`. */
export interface WebhookEvent {
  /** The order snapshot found in the body. */
  order: Order;
  /** The apply options: source `webhook`, the event id (or dedupe key), the whole body, the arrival time. */
  options: ApplyOptions & { source: 'webhook'; eventId: string };
}

function isJobData(data: unknown): data is WebhookJobData {
  const d = data as Partial<WebhookJobData> | null;
  return (
    typeof d === 'object' &&
    d !== null &&
    typeof d.rawBody === 'string' &&
    (d.rawBodyEncoding === 'utf8' || d.rawBodyEncoding === 'base64') &&
    typeof d.dedupeKey === 'string' &&
    d.dedupeKey !== '' &&
    (d.eventId === null || d.eventId === undefined || typeof d.eventId === 'string') &&
    (d.upstream === undefined || typeof d.upstream === 'string')
  );
}

/**
 * The event's `created_at` (decisions.md: when the upstream made the event), in ms, if it has a
 * valid one; without an offset it is UTC (spec §2).
 */
function eventTime(body: unknown): number | undefined {
  const ms = parseUpstreamTime((body as { created_at?: unknown } | null)?.created_at);
  return Number.isFinite(ms) ? ms : undefined;
}

/**
 * Reads a webhook job as the receiver queued it: decodes the exact bytes, parses them as UTF-8
 * JSON and finds the order (decisions.md: under `data`, under `order`, or the body itself). The
 * event is deduplicated in the store on the event id header, else on the receiver's dedupe key
 * (the SHA-256 of the body), so a redelivery the queue no longer remembers still applies once.
 *
 * Throws {@link ParkedEventError} for an event that can never apply.
 */
export function readWebhookJob(data: unknown): WebhookEvent {
  if (!isJobData(data)) {
    throw new ParkedEventError(
      'INVALID_JOB',
      'the job data is not a webhook delivery queued by the receiver',
    );
  }
  const bytes = decodeWebhookRawBody(data);
  if (!isUtf8(bytes)) {
    throw new ParkedEventError('NOT_UTF8', `the ${bytes.length}-byte body is not UTF-8 text, so not JSON`);
  }
  const parsed = parseWebhookBody(bytes);
  if (!parsed.ok) throw new ParkedEventError('UNPARSEABLE_BODY', parsed.reason);
  const found = findOrderInWebhook(parsed.body);
  if (!found) {
    throw new ParkedEventError(
      'NO_ORDER',
      'the body holds no order: no object with a partner_ref or invoice_number under data, order or the top level',
    );
  }
  return {
    order: found.order as unknown as Order,
    options: {
      source: 'webhook',
      eventId: storedEventId(data),
      payload: parsed.body,
      receivedAt: typeof data.receivedAt === 'number' ? data.receivedAt : Date.now(),
      // A body that is the order itself has no event time: its created_at is the order's.
      occurredAt: found.location === 'top-level' ? undefined : eventTime(parsed.body),
      // Applied only to an order on the upstream whose secret signed it (docs/upstreams.md).
      upstream: data.upstream ?? DEFAULT_UPSTREAM,
    },
  };
}
