import type { Queue } from 'bullmq';
import { orderRefOf } from '../store/feed.js';
import type { NotifyDelivery } from '../store/notify-deliveries.js';
import type { NotifyEndpoint } from '../store/notify-endpoints.js';
import type { OrderStore } from '../store/order-store.js';
import { matchesEvent, parseEventPatterns } from './event-filter.js';
import { NotifyError } from './notify-error.js';
import { type NotifyJobData, notifyJobId, notifyJobOptions } from './notify-queue.js';
import { generateEndpointSecret } from './signature.js';

/**
 * What the CLI does with endpoints and notifications (`h2h-sync endpoints …`,
 * `h2h-sync notifications …`; docs/cli.md).
 */

type Store = Pick<OrderStore, 'endpoints' | 'deliveries' | 'feed'>;

/** An endpoint as the CLI shows it: never its secrets (they are printed once, when made). */
export interface EndpointView {
  id: number;
  url: string;
  events: string[];
  state: 'enabled' | 'disabled';
  disabledReason: string | null;
  createdAt: string;
  /** Until when the previous secret still signs, when a rotation is under way. */
  rotationUntil: string | null;
  cursor: number;
}

export function endpointView(e: NotifyEndpoint, now = Date.now()): EndpointView {
  return {
    id: e.id,
    url: e.url,
    events: e.events,
    state: e.disabledAt === null ? 'enabled' : 'disabled',
    disabledReason: e.disabledReason,
    createdAt: new Date(e.createdAt).toISOString(),
    rotationUntil:
      e.previousSecretUntil !== null && e.previousSecretUntil > now
        ? new Date(e.previousSecretUntil).toISOString()
        : null,
    cursor: e.cursor,
  };
}

/** Adds an endpoint for `url` and `events` (comma-separated patterns) with a new secret. */
export function addEndpoint(store: Store, url: string, events: string): NotifyEndpoint {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new NotifyError(
      'INVALID_ENDPOINT_URL',
      `"${url}" is not a URL: give the shop's full https:// address`,
    );
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
    throw new NotifyError(
      'INVALID_ENDPOINT_URL',
      `"${url}" is not http(s): give the shop's full https:// address`,
    );
  }
  return store.endpoints.add({
    url: parsed.href,
    events: parseEventPatterns(events),
    secret: generateEndpointSecret(),
  });
}

function mustFind(store: Store, id: number): NotifyEndpoint {
  const endpoint = store.endpoints.get(id);
  if (!endpoint) {
    throw new NotifyError('ENDPOINT_NOT_FOUND', `no endpoint ${id}: see \`h2h-sync endpoints list\``);
  }
  return endpoint;
}

export function disableEndpoint(store: Store, id: number): NotifyEndpoint {
  mustFind(store, id);
  return store.endpoints.disable(id, 'disabled with h2h-sync endpoints disable')!;
}

/** Gives the endpoint a new secret; the old one signs beside it for `graceMs`. Returns the endpoint, new secret included. */
export function rotateEndpointSecret(store: Store, id: number, graceMs: number): NotifyEndpoint {
  mustFind(store, id);
  return store.endpoints.rotateSecret(id, generateEndpointSecret(), graceMs)!;
}

/** Reads `--since` (ISO 8601) as ms; throws `INVALID_SINCE`. */
export function parseSince(text: string | undefined): number {
  if (text === undefined) return 0;
  const ms = Date.parse(text);
  if (!/^\d{4}-\d{2}-\d{2}/.test(text) || Number.isNaN(ms)) {
    throw new NotifyError(
      'INVALID_SINCE',
      `--since "${text}" is not an ISO 8601 time, e.g. 2026-11-25T09:00:00Z`,
    );
  }
  return ms;
}

export interface NotificationFilter {
  since: number;
  endpointId?: number | undefined;
}

/** Events given up at their endpoint (the retry schedule ran out), last attempt since `since`. */
export function failedNotifications(
  store: Store,
  { since, endpointId }: NotificationFilter,
): NotifyDelivery[] {
  if (endpointId !== undefined) mustFind(store, endpointId);
  return store.deliveries.failed({ since, ...(endpointId === undefined ? {} : { endpointId }) });
}

/**
 * Sends the given-up notifications again, each from its first attempt: the failed job itself
 * when BullMQ still keeps it, else a new job for the same event. Returns the job ids.
 */
export async function retryFailedNotifications(
  store: Store,
  queue: Queue<NotifyJobData>,
  filter: NotificationFilter,
  { retries, now = Date.now() }: { retries: number; now?: number },
): Promise<string[]> {
  const ids: string[] = [];
  for (const failed of failedNotifications(store, filter)) {
    const id = notifyJobId(failed.endpointId, failed.seq);
    const job = await queue.getJob(id);
    if (job && (await job.isFailed())) {
      await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
      ids.push(id);
      continue;
    }
    const retryId = `${id}-retry-${now}`;
    await queue.add(
      'retry',
      { endpointId: failed.endpointId, seq: failed.seq },
      { ...notifyJobOptions(retries), jobId: retryId },
    );
    ids.push(retryId);
  }
  return ids;
}

/**
 * Sends again every event of the feed committed since `since` to each enabled endpoint that
 * wants it (or only `endpointId`), delivered or not: the same `webhook-id` as the first time,
 * so a shop that had it already recognises it. Replays do not wait for each other.
 */
export async function replayNotifications(
  store: Store,
  queue: Queue<NotifyJobData>,
  { since, endpointId }: NotificationFilter,
  { retries, now = Date.now() }: { retries: number; now?: number },
): Promise<{ jobs: number; events: number }> {
  const endpoints = endpointId === undefined ? store.endpoints.enabled() : [mustFind(store, endpointId)];
  let jobs = 0;
  let events = 0;
  let after = 0;
  for (;;) {
    const page = store.feed.since(since, after, 500);
    if (page.length === 0) break;
    events += page.length;
    const adds = page.flatMap((event) =>
      endpoints
        .filter((endpoint) => matchesEvent(endpoint.events, event.type))
        .map((endpoint) => ({
          name: `replay ${event.type} ${orderRefOf(event) ?? ''}`.trim(),
          data: { endpointId: endpoint.id, seq: event.seq, replay: true },
          opts: {
            ...notifyJobOptions(retries),
            jobId: `${notifyJobId(endpoint.id, event.seq)}-replay-${now}`,
          },
        })),
    );
    if (adds.length > 0) await queue.addBulk(adds);
    jobs += adds.length;
    after = page.at(-1)!.seq;
  }
  return { jobs, events };
}
