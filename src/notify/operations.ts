import type { NotifyDelivery } from '../store/notify-deliveries.js';
import type { EnableOutcome, NotifyEndpoint } from '../store/notify-endpoints.js';
import type { OrderStore } from '../store/order-store.js';
import { matchesEvent, parseEventPatterns } from './event-filter.js';
import { NotifyError } from './notify-error.js';
import { generateEndpointSecret } from './signature.js';

/**
 * What the CLI does with endpoints and notifications (`h2h-sync endpoints …`,
 * `h2h-sync notifications …`; docs/cli.md).
 */

type Store = Pick<OrderStore, 'endpoints' | 'deliveries' | 'feed' | 'outbox'>;

/** Adds an endpoint for `url` and `events` (comma-separated patterns) with a new secret. */
export async function addEndpoint(store: Store, url: string, events: string): Promise<NotifyEndpoint> {
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

function notFound(id: number): NotifyError {
  return new NotifyError('ENDPOINT_NOT_FOUND', `no endpoint ${id}: see \`h2h-sync endpoints list\``);
}

/** The endpoint `id`; throws `ENDPOINT_NOT_FOUND` naming `endpoints list`. */
export async function findEndpoint(store: Store, id: number): Promise<NotifyEndpoint> {
  const endpoint = await store.endpoints.get(id);
  if (!endpoint) throw notFound(id);
  return endpoint;
}

export async function disableEndpoint(store: Store, id: number): Promise<NotifyEndpoint> {
  await findEndpoint(store, id);
  return (await store.endpoints.disable(id, 'disabled with h2h-sync endpoints disable'))!;
}

/**
 * Enables a disabled endpoint again (disabled by `endpoints disable` or by a 410 answer). It is
 * sent the events committed from now on, as a new endpoint is: those committed while it was
 * disabled were not queued, and the ones queued then were skipped; both are in `missed`, for
 * the operator to resend if the shop wants them (docs/api.md, "Enabling an endpoint again").
 * One write transaction in the store (NotifyEndpoints.enable).
 */
export async function enableEndpoint(store: Store, id: number): Promise<EnableOutcome> {
  const result = await store.endpoints.enable(id);
  if (!result) throw notFound(id);
  return result;
}

/** Gives the endpoint a new secret; the old one signs beside it for `graceMs`. Returns the endpoint, new secret included. */
export async function rotateEndpointSecret(
  store: Store,
  id: number,
  graceMs: number,
): Promise<NotifyEndpoint> {
  await findEndpoint(store, id);
  return (await store.endpoints.rotateSecret(id, generateEndpointSecret(), graceMs))!;
}

export interface NotificationFilter {
  since: number;
  endpointId?: number | undefined;
}

/** Which events `notifications resend` sends: committed at or after `since`, seq within `fromSeq`..`toSeq`. */
export interface ResendRange extends NotificationFilter {
  fromSeq?: number | undefined;
  toSeq?: number | undefined;
}

/** Events given up at their endpoint (the retry schedule ran out), last attempt since `since`. */
export async function failedNotifications(
  store: Store,
  { since, endpointId }: NotificationFilter,
): Promise<NotifyDelivery[]> {
  if (endpointId !== undefined) await findEndpoint(store, endpointId);
  return store.deliveries.failed({ since, ...(endpointId === undefined ? {} : { endpointId }) });
}

/**
 * Sends the given-up notifications again, each from its first attempt with a fresh retry
 * schedule: each goes back into the outbox, due now, in its order's place. Returns how many.
 */
export async function retryFailedNotifications(store: Store, filter: NotificationFilter): Promise<number> {
  let added = 0;
  for (const failed of await failedNotifications(store, filter)) {
    added += await store.outbox.enqueue(failed.endpointId, [failed.seq]);
  }
  return added;
}

/**
 * Sends again every event of the feed in the range (committed since `since`, seq from `fromSeq`
 * to `toSeq`) to each enabled endpoint that wants it (or only `endpointId`), delivered or not:
 * the same `webhook-id` as the first time, so a shop that had it already recognises it. Each goes
 * into the outbox like a new event (one still there is left as it is), so an order's events are
 * sent again in their order. Returns the notifications added and the events read.
 */
export async function resendNotifications(
  store: Store,
  { since, endpointId, fromSeq, toSeq }: ResendRange,
): Promise<{ notifications: number; events: number }> {
  if (fromSeq !== undefined && toSeq !== undefined && toSeq < fromSeq) {
    throw new NotifyError('INVALID_SEQ', `--to-seq ${toSeq} is below --from-seq ${fromSeq}: swap them`);
  }
  const endpoints =
    endpointId === undefined ? await store.endpoints.enabled() : [await findEndpoint(store, endpointId)];
  let notifications = 0;
  let events = 0;
  let after = fromSeq === undefined ? 0 : fromSeq - 1;
  for (;;) {
    const page = (await store.feed.since(since, after, 500)).filter(
      (event) => toSeq === undefined || event.seq <= toSeq,
    );
    if (page.length === 0) break;
    events += page.length;
    for (const endpoint of endpoints) {
      const seqs = page
        .filter((event) => matchesEvent(endpoint.events, event.type))
        .map((event) => event.seq);
      notifications += await store.outbox.enqueue(endpoint.id, seqs);
    }
    after = page.at(-1)!.seq;
  }
  return { notifications, events };
}
