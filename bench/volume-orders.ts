// The orders of the volume bench (bench/volume.ts), each written through the store's own write
// path: the create answer, the worker's apply of the final webhook (applyWebhookJob, the event
// worker's path without BullMQ), and the notifier's delivery of each feed event (outbox turn and
// settle). Order i is a function of i alone: its kind (status, upstream, open or final) of
// `i % kinds`, its references and times of i, so the bulk loader (volume-loader.ts) can write
// order i as a copy of order `i % kinds` with its references and times moved.
import { GroupCommit } from '../src/shared/group-commit.js';
import type { OrderStore } from '../src/store/order-store.js';
import type { ApplyItem, ApplyResult } from '../src/store/order-writer.js';
import type { Order } from '../src/upstream/model.js';
import { applyWebhookJob } from '../src/worker/event-worker.js';

/** When order 0 is created (ms): 2024-01-01, so 10 million orders end late in 2025. */
export const VOLUME_START = Date.UTC(2024, 0, 1);
/** One order every 6 s: 14,400 a day, 10 million in about 694 days. */
export const VOLUME_GAP_MS = 6000;
/** The kinds the orders cycle through (and the template orders the loader copies). */
export const VOLUME_KINDS = 200;
/** The upstreams the orders are placed on, by kind. */
export const VOLUME_UPSTREAMS = ['default', 'alpha', 'beta'] as const;
/** The notification endpoint every feed event is delivered to. */
export const VOLUME_ENDPOINT_URL = 'https://shop.example/h2h-notifications';

/** The fixed-width token in every reference of order i: the loader replaces it. */
export function volumeToken(i: number): string {
  return `v${String(i).padStart(10, '0')}`;
}

export function volumeRef(i: number): string {
  return `shop-${volumeToken(i)}`;
}

export function volumeInvoice(i: number): string {
  return `INV-${volumeToken(i)}`;
}

/** When order i is created (ms). */
export function volumeBase(i: number): number {
  return VOLUME_START + i * VOLUME_GAP_MS;
}

/** What order i is, by its kind `i % kinds`. */
export function volumeKind(i: number, kinds = VOLUME_KINDS) {
  const k = i % kinds;
  return {
    upstream: VOLUME_UPSTREAMS[k % VOLUME_UPSTREAMS.length]!,
    /** Still PROCESSING (0.5 % with 200 kinds). */
    open: k % 200 === 7,
    /** FAILED, credited (2 %). */
    failed: k % 50 === 3,
  };
}

/** A clock the writer of the volume orders sets to each step's time. */
export interface SetClock {
  now: () => number;
  set: (ms: number) => void;
}

export function settableClock(start = VOLUME_START): SetClock {
  let t = start;
  return { now: () => t, set: (ms) => (t = ms) };
}

const iso = (ms: number) => new Date(ms).toISOString();

function snapshot(i: number, status: string, kinds: number): Order {
  const base = volumeBase(i);
  const { failed } = volumeKind(i, kinds);
  return {
    invoice_number: volumeInvoice(i),
    partner_ref: volumeRef(i),
    status,
    amount: 15000 + (i % kinds) * 10,
    target: `${volumeToken(i)}(2001)`,
    product_name: 'Mobile Legends 86 Diamonds',
    product_code: 'ML86',
    serial_number: status === 'SUCCESS' ? `SN-${volumeToken(i)}` : null,
    nickname: 'player',
    message: status === 'FAILED' ? 'Target not found' : null,
    created_at: iso(base + 200),
    success_at: status === 'SUCCESS' || (status === 'FAILED' && failed) ? iso(base + 2500) : null,
  };
}

/** The webhook job of order i's final status, as the receiver queues it. */
export function volumeWebhookJob(
  i: number,
  status: string,
  kinds = VOLUME_KINDS,
  receivedAt = volumeBase(i) + 3000,
) {
  const { upstream } = volumeKind(i, kinds);
  const eventId = `evt-${volumeToken(i)}-${status}`;
  const body = {
    event_id: eventId,
    event: 'order.updated',
    created_at: iso(volumeBase(i) + 2500),
    data: snapshot(i, status, kinds),
  };
  return {
    dedupeKey: `event-id:${eventId}`,
    eventId,
    rawBody: JSON.stringify(body),
    rawBodyEncoding: 'utf8' as const,
    receivedAt,
    ...(upstream === 'default' ? {} : { upstream }),
    headers: { timestamp: Math.floor(receivedAt / 1000), eventType: 'order.updated' },
  };
}

/** Adds the shop's notification endpoint (before the first order): its id. */
export async function addVolumeEndpoint(store: OrderStore): Promise<number> {
  const endpoint = await store.endpoints.add({
    url: VOLUME_ENDPOINT_URL,
    events: ['order.*'],
    // A fixed secret: two builds of the same orders are equal row for row.
    secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
  });
  return endpoint.id;
}

/** The notifier's look at `at`: adds the new feed events and delivers each (a 200 in 40 ms). */
async function deliver(store: OrderStore, clock: SetClock, endpointId: number, at: number): Promise<void> {
  clock.set(at);
  const endpoint = (await store.endpoints.list()).find((e) => e.id === endpointId)!;
  const { picked } = await store.outbox.turn({
    settled: [],
    endpoints: [{ id: endpointId, cursor: endpoint.cursor, types: ['order.*'], room: 10 }],
    leaseMs: 20_000,
  });
  if (picked.length === 0) return;
  await store.outbox.settleBatch(
    picked.map((item) => ({
      item,
      outcome: 'delivered' as const,
      record: {
        endpointId,
        seq: item.seq,
        type: item.event?.type ?? 'order.updated',
        partnerRef:
          item.event && 'partner_ref' in item.event.data ? String(item.event.data.partner_ref) : null,
        attempt: item.attempt,
        requestedAt: at,
        status: 200,
        durationMs: 40,
        error: null,
        outcome: 'delivered' as const,
      },
    })),
  );
}

/**
 * Writes order i through the write path on `clock`: the create answer (PROCESSING) at its base
 * time, its delivery, then (unless open) the final webhook through the worker's apply and its
 * delivery.
 */
export async function writeVolumeOrder(
  store: OrderStore,
  clock: SetClock,
  endpointId: number,
  i: number,
  kinds = VOLUME_KINDS,
): Promise<void> {
  const base = volumeBase(i);
  const { upstream, open, failed } = volumeKind(i, kinds);
  clock.set(base + 300);
  await store.writer.applyOrderSnapshot(snapshot(i, 'PROCESSING', kinds), { source: 'create', upstream });
  await deliver(store, clock, endpointId, base + 1000);
  if (open) return;
  clock.set(base + 3000);
  const commit = new GroupCommit<ApplyItem, ApplyResult>({
    runBatch: (items) => store.writer.applyBatch(items),
  });
  await applyWebhookJob(volumeWebhookJob(i, failed ? 'FAILED' : 'SUCCESS', kinds), commit);
  await deliver(store, clock, endpointId, base + 4000);
}
