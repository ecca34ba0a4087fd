import type { Queue } from 'bullmq';
import { orderRefOf } from '../store/feed.js';
import type { OrderStore } from '../store/order-store.js';
import { matchesEvent } from './event-filter.js';
import { type NotifyJobData, notifyJobId, notifyJobOptions } from './notify-queue.js';

/** Feed events one step of the dispatcher reads per endpoint. */
const DISPATCH_PAGE = 500;

/**
 * One pass of the dispatcher: for each enabled endpoint, reads the feed after its cursor, adds a
 * job per wanted event, and only once Redis has acknowledged them advances the cursor. A crash in
 * between leaves the cursor behind, so the next pass adds the same jobs again, and their
 * deterministic ids ({@link notifyJobId}) make that a no-op: nothing committed is lost, nothing
 * is queued twice. Returns how many jobs it added.
 */
export async function dispatchNotifications(
  store: Pick<OrderStore, 'feed' | 'endpoints'>,
  queue: Queue<NotifyJobData>,
  { retries }: { retries: number },
): Promise<number> {
  let added = 0;
  const options = notifyJobOptions(retries);
  for (const endpoint of store.endpoints.enabled()) {
    let cursor = endpoint.cursor;
    for (;;) {
      const events = store.feed.after(cursor, DISPATCH_PAGE);
      if (events.length === 0) break;
      const jobs = events
        .filter((event) => matchesEvent(endpoint.events, event.type))
        .map((event) => ({
          name: `${event.type} ${orderRefOf(event) ?? ''}`.trim(),
          data: { endpointId: endpoint.id, seq: event.seq },
          opts: { ...options, jobId: notifyJobId(endpoint.id, event.seq) },
        }));
      if (jobs.length > 0) await queue.addBulk(jobs);
      added += jobs.length;
      cursor = events.at(-1)!.seq;
      store.endpoints.advanceCursor(endpoint.id, cursor);
      if (events.length < DISPATCH_PAGE) break;
    }
  }
  return added;
}
