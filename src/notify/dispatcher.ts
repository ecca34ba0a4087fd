import type { Queue } from 'bullmq';
import type { FeedEvent } from '../store/feed.js';
import type { OrderStore } from '../store/order-store.js';
import type { DeliveryHints } from './delivery-hints.js';
import type { DirectDeliveries } from './direct-delivery.js';
import { matchesEvent } from './event-filter.js';
import { type NotifyJobData, notifyJobId, notifyJobName, notifyJobOptions } from './notify-queue.js';

/** Feed events one step of the dispatcher reads per endpoint. */
const DISPATCH_PAGE = 500;

/**
 * Longest time between two writes of an endpoint's cursor to the store. The dispatcher keeps the
 * cursor in memory and writes it at most this often (and when it goes idle): a write takes
 * SQLite's write lock, which the processes committing orders need, and a pass every few ms
 * writing each time slowed them down. A crash loses at most this much of the cursor, whose
 * events are then added again: a no-op, their job ids being kept far longer (notify-queue.ts).
 */
export const CURSOR_WRITE_EVERY_MS = 1_000;

/** What the dispatcher remembers between passes: each endpoint's cursor and when it was written. */
export type DispatchMemory = Map<number, { cursor: number; writtenAt: number }>;

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
  {
    retries,
    memory,
    now = Date.now(),
    commit = (write) => write(),
    hints,
    direct,
    valid = () => true,
  }: {
    retries: number;
    memory?: DispatchMemory;
    now?: number;
    /**
     * Runs a cursor write. Default: awaits it. The notifier starts it and does not wait, so a
     * pass is never held up behind the order writers' lock (a failed write only leaves the
     * cursor behind, whose events are added again as a no-op).
     */
    commit?: (write: () => Promise<void>) => Promise<void>;
    /** Keeps what the pass read for this process's deliveries of its jobs (delivery-hints.ts). */
    hints?: DeliveryHints;
    /**
     * The dispatcher's own deliveries (direct-delivery.ts): it takes what it has room for of a
     * page that is not full, the rest becomes jobs; the cursor is written only up to its first
     * unsettled event. Events up to `recoverUpTo` are looked up before they are sent.
     */
    direct?: {
      deliveries: Pick<DirectDeliveries, 'take' | 'unsettledFrom' | 'isUnsettled'>;
      recoverUpTo: number;
    };
    /**
     * Whether the pass may go on, looked at before each page (the notifier's lease still surely
     * held): a pass held up past it stops, its cursors where they were.
     */
    valid?: () => boolean;
  },
): Promise<number> {
  let added = 0;
  const options = notifyJobOptions(retries);
  const mark = hints?.mark() ?? 0;
  const endpoints = await store.endpoints.enabled();
  hints?.endpointsRead(endpoints, mark);
  for (const endpoint of endpoints) {
    const remembered = memory?.get(endpoint.id);
    // The stored cursor moves ahead of the remembered one when the endpoint is enabled again.
    let cursor = Math.max(endpoint.cursor, remembered?.cursor ?? 0);
    const persist = async (force: boolean) => {
      const to = durableCursor(endpoint.id, cursor, direct?.deliveries);
      if (!memory) return commit(() => store.endpoints.advanceCursor(endpoint.id, to));
      const last = memory.get(endpoint.id);
      if (force || !last || now - last.writtenAt >= CURSOR_WRITE_EVERY_MS) {
        memory.set(endpoint.id, { cursor, writtenAt: now });
        if (to > endpoint.cursor) await commit(() => store.endpoints.advanceCursor(endpoint.id, to));
      } else {
        memory.set(endpoint.id, { cursor, writtenAt: last.writtenAt });
      }
    };
    let moved = false;
    for (;;) {
      if (!valid()) return added;
      const events = await store.feed.after(cursor, DISPATCH_PAGE);
      if (events.length === 0) break;
      if (!valid()) return added; // the read took long: looked at again before anything is sent
      // An event this process is delivering itself already (read again after it took the lease
      // back) is left to that delivery.
      const wanted = events.filter(
        (event) =>
          matchesEvent(endpoint.events, event.type) &&
          !direct?.deliveries.isUnsettled(endpoint.id, event.seq),
      );
      // Before the deliveries start (they take the hints), and before the add: a job may start
      // before addBulk's answer is read. Not for a full page (a backlog): its jobs run long
      // after, when the hints would have been pushed out. Not for events another holder of the
      // lease may have handled (up to `recoverUpTo`): without a hint, their jobs look for a note
      // of an earlier 2xx (deliver-notification.ts).
      if (events.length < DISPATCH_PAGE) {
        const fresh = (event: FeedEvent) => event.seq > (direct?.recoverUpTo ?? 0);
        hints?.dispatched(endpoint, events.filter(fresh), wanted.filter(fresh));
      }
      // The dispatcher's own deliveries take a page that is not full (a backlog's go to jobs).
      const queued =
        direct && events.length < DISPATCH_PAGE
          ? direct.deliveries.take(endpoint, wanted, direct.recoverUpTo)
          : wanted;
      added += wanted.length - queued.length;
      const jobs = queued.map((event) => ({
        name: notifyJobName(event),
        data: { endpointId: endpoint.id, seq: event.seq },
        opts: { ...options, jobId: notifyJobId(endpoint.id, event.seq) },
      }));
      if (jobs.length > 0) await queue.addBulk(jobs);
      added += jobs.length;
      cursor = events.at(-1)!.seq;
      moved = true;
      await persist(false);
      if (events.length < DISPATCH_PAGE) break;
    }
    // Idle: the cursor in memory is written now if it is ahead of the store's.
    if (!moved && durableCursor(endpoint.id, cursor, direct?.deliveries) > endpoint.cursor)
      await persist(true);
  }
  return added;
}

/**
 * The cursor an endpoint may be written with: the dispatcher's, or just before the first event
 * its own deliveries have not settled yet (a process that dies leaves those to be read again).
 */
export function durableCursor(
  endpointId: number,
  cursor: number,
  direct: Pick<DirectDeliveries, 'unsettledFrom'> | undefined,
): number {
  const unsettled = direct?.unsettledFrom(endpointId);
  return unsettled === undefined ? cursor : Math.min(cursor, unsettled - 1);
}
