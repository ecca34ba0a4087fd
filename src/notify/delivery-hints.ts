import { type FeedEvent, isOrderEvent } from '../store/feed.js';
import type { NotifyEndpoint } from '../store/notify-endpoints.js';
import { matchesEvent } from './event-filter.js';

/**
 * What this process's dispatcher has just read, kept for the deliveries it queues, so that a
 * delivery's first run in the same process reads none of it from the store again (docs/
 * performance.md, "Notifications"). On a SQLite store that other processes commit to hundreds of
 * times a second, every read starts a read transaction that finds the store changed and reads its
 * pages again: at 500 events/s, the four reads of a delivery were about a tenth of the worker's
 * CPU. Each hint is either certain or absent; without one, a delivery reads the store as before.
 *
 * - **The event**, read by the dispatcher anyway. A committed event never changes.
 * - **The endpoint**, as of the dispatcher's last pass, used by every run (retries and replays
 *   too) while that pass is at most {@link ENDPOINT_FRESH_MS} old. A change another process
 *   makes (`endpoints disable`, `rotate-secret`) reaches the deliveries with the dispatcher's next
 *   pass, as it reaches the dispatcher itself; this process's own (a 410) at once
 *   ({@link forgetEndpoint}), even while a pass is reading the endpoints.
 * - **The order's previous event at the endpoint**, for the order-wait (deliver-notification.ts):
 *   an order's events carry versions 1, 2, 3 … in feed order (docs/api.md), so version 1 has no
 *   earlier event, and version v's earlier event is the one of version v − 1 when the dispatcher
 *   read it. Anything else (versions that do not follow, a filter the earlier event does not
 *   match) leaves it to the store.
 * - **Events settled at an endpoint** by this process's own records: settled is final (a row once
 *   delivered or given up stays), so the next event of the order need not ask the store.
 *
 * Every map is bounded; the oldest entries go first. Jobs another process runs leave their hints
 * here until they are pushed out. A backlog's full pages give none (their jobs run long after).
 */
export class DeliveryHints {
  readonly #events = new Map<string, { event: FeedEvent; previous: number | null | undefined }>();
  /** The events read of each order, by `<partner_ref>@<version>`: seq and type. */
  readonly #orderEvents = new Map<string, { seq: number; type: FeedEvent['type'] }>();
  readonly #endpoints = new Map<number, { endpoint: NotifyEndpoint; at: number }>();
  readonly #settled = new Set<string>();
  /** Endpoints this process forgot, with the generation then; a pass marked before does not bring them back. */
  readonly #forgotten = new Map<number, number>();
  #generation = 0;
  readonly #max: number;
  readonly #now: () => number;

  constructor({
    max = DEFAULT_MAX_HINTS,
    now = () => performance.now(),
  }: { max?: number; now?: () => number } = {}) {
    this.#max = max;
    this.#now = now;
  }

  /** A mark to take before the dispatcher reads the endpoints, for {@link endpointsRead}. */
  mark(): number {
    return this.#generation;
  }

  /**
   * The endpoints enabled at the dispatcher's pass, read after {@link mark} gave `mark`. One this
   * process forgot after the mark (its read may predate the change) is left out.
   */
  endpointsRead(endpoints: readonly NotifyEndpoint[], mark: number): void {
    const at = this.#now();
    this.#endpoints.clear();
    for (const endpoint of endpoints) {
      if ((this.#forgotten.get(endpoint.id) ?? -1) >= mark) continue;
      this.#endpoints.set(endpoint.id, { endpoint, at });
    }
  }

  /** The endpoint as the dispatcher's last pass read it, if that pass is recent and it was enabled. */
  endpoint(id: number): NotifyEndpoint | undefined {
    const known = this.#endpoints.get(id);
    return known && this.#now() - known.at <= ENDPOINT_FRESH_MS ? known.endpoint : undefined;
  }

  /** This process changed the endpoint (disabled it): its deliveries read it from the store. */
  forgetEndpoint(id: number): void {
    this.#endpoints.delete(id);
    // A pass reading the endpoints right now must not bring it back.
    this.#forgotten.set(id, this.#generation);
    this.#generation += 1;
  }

  /**
   * The dispatcher queued `queued` (events read in feed order, those the endpoint wants) for
   * `endpoint`; `read` is every event of the page it read them from, wanted or not.
   */
  dispatched(endpoint: NotifyEndpoint, read: readonly FeedEvent[], queued: readonly FeedEvent[]): void {
    const wanted = new Set(queued.map((event) => event.seq));
    for (const event of read) {
      if (!isOrderEvent(event)) {
        if (wanted.has(event.seq)) this.#remember(endpoint.id, event, null);
        continue;
      }
      const { partner_ref: ref, version } = event.data;
      if (wanted.has(event.seq)) {
        let previous: number | null | undefined;
        const earlier = this.#orderEvents.get(`${ref}@${version - 1}`);
        if (version === 1) previous = null;
        else if (earlier && earlier.seq < event.seq && matchesEvent(endpoint.events, earlier.type)) {
          // Only an event after the endpoint's start counts; before it, none does.
          previous = earlier.seq > endpoint.fromSeq ? earlier.seq : null;
        }
        // Otherwise unknown: version v − 1 not read (or not wanted: an earlier one might be).
        this.#remember(endpoint.id, event, previous);
      }
      this.#orderEvents.set(`${ref}@${version}`, { seq: event.seq, type: event.type });
      bound(this.#orderEvents, this.#max * 4);
    }
  }

  /**
   * Takes the hint of (endpoint, seq): the event, and the seq of the order's previous event the
   * endpoint wants (null: none; undefined: unknown, ask the store). Undefined when there is none.
   */
  take(
    endpointId: number,
    seq: number,
  ): { event: FeedEvent; previous: number | null | undefined } | undefined {
    const key = keyOf(endpointId, seq);
    const hint = this.#events.get(key);
    if (hint) this.#events.delete(key);
    return hint;
  }

  /** This process recorded (endpoint, seq) as settled (delivered, given up …). */
  settled(endpointId: number, seq: number): void {
    this.#settled.add(keyOf(endpointId, seq));
    bound(this.#settled, this.#max * 2);
  }

  /** Whether this process recorded (endpoint, seq) as settled; false: it does not know. */
  isSettled(endpointId: number, seq: number): boolean {
    return this.#settled.has(keyOf(endpointId, seq));
  }

  #remember(endpointId: number, event: FeedEvent, previous: number | null | undefined): void {
    this.#events.set(keyOf(endpointId, event.seq), { event, previous });
    bound(this.#events, this.#max);
  }
}

/**
 * Default bound of the event hints, (endpoint, event) pairs: ten seconds of deliveries at 500 a
 * second to one endpoint (whole parsed orders: ~10–20 MB at the bound).
 */
const DEFAULT_MAX_HINTS = 5_000;

/** Longest age of the dispatcher's read of an endpoint that a delivery uses instead of its own. */
export const ENDPOINT_FRESH_MS = 1_000;

/** The key of an event at an endpoint in the maps above. */
const keyOf = (endpointId: number, seq: number) => `${endpointId}-${seq}`;

/** Drops the oldest entries of `entries` (insertion order) past `max`. */
function bound(entries: Map<string, unknown> | Set<string>, max: number): void {
  for (const key of entries.keys()) {
    if (entries.size <= max) return;
    entries.delete(key);
  }
}
