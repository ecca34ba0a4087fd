import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { type Notifier, type NotifierOptions, startNotifier } from '../../src/notify/notifier.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { snapshot, tempStore } from './store.js';
import { type SinkAnswer, startWebhookSink, type WebhookDelivery } from './webhook-sink.js';
import { cleanupScope } from './worker.js';

/**
 * Harness of the notification tests. Every delivery is verified with the `standardwebhooks`
 * package, the reference implementation of the specification, never with our own signing code.
 */

/** The notification body as the specification and docs/api.md shape it. */
export interface NotificationBody {
  type: string;
  timestamp: string;
  /** An order event's: the order's status before the change. */
  previous_status?: string | null;
  data: { partner_ref: string; status: string | null; version: number; [key: string]: unknown };
}

/** Verifies a delivery with `standardwebhooks` under `secret` and returns its parsed body; throws if it does not verify. */
export function verifyNotification(secret: string, delivery: WebhookDelivery): NotificationBody {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(delivery.headers)) {
    if (typeof value === 'string') headers[name] = value;
  }
  return new Webhook(secret).verify(delivery.rawBody.toString('utf8'), headers) as NotificationBody;
}

/** The feed seq a delivery carries (`webhook-id: evt_<seq>`). */
export function seqOf(delivery: Pick<WebhookDelivery, 'headers'>): number {
  const id = delivery.headers['webhook-id'];
  assert.equal(typeof id, 'string');
  return Number((id as string).replace(/^evt_/, ''));
}

/**
 * The environment of a real `h2h-sync worker` child for the notification crash tests: quick
 * retries and dispatch, and a short POST timeout (H2H_NOTIFY_TIMEOUT_MS: a killed worker's
 * notifications are leased for twice it, then taken over).
 */
export function crashTestWorkerEnv(redisUrl: string, dbPath: string): Record<string, string> {
  return {
    REDIS_URL: redisUrl,
    H2H_DB_PATH: dbPath,
    ADMIN_PORT: '0',
    H2H_NOTIFY_TIMEOUT_MS: '1000',
    H2H_NOTIFY_RETRY_S: '0.05,0.1,0.2,0.5',
    H2H_NOTIFY_DISPATCH_EVERY_MS: '20',
    H2H_WORKER_LOCK_DURATION_MS: '1000',
    H2H_WORKER_STALLED_INTERVAL_MS: '250',
  };
}

/** A notifier on `store` with short timings for tests, closed by `t.after`. */
export async function startTestNotifier(
  t: Pick<TestContext, 'after'>,
  options: { store: OrderStore } & Partial<NotifierOptions>,
): Promise<Notifier> {
  const notifier = await startNotifier({
    dispatchEveryMs: 20,
    timeoutMs: 2_000,
    // More retries than any test fails in a row, so none gives up unless it asks for it.
    retryScheduleMs: [50, 100, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200],
    ...options,
  });
  t.after(() => notifier.close({ timeoutMs: 5_000 }));
  return notifier;
}

/**
 * Takes order `ref` through its life: submitted (PENDING), PROCESSING, SUCCESS, SUCCESS with its
 * serial: four feed events, in this order.
 */
export async function liveOrder(store: OrderStore, ref: string): Promise<void> {
  await store.writer.createLocalOrder({
    partnerRef: ref,
    productCode: 'ML86',
    data: { user_id: '12345678', server_id: '2001' },
  });
  await store.writer.applyOrderSnapshot(snapshot(ref, 'PENDING'), { source: 'create' });
  await store.writer.applyOrderSnapshot(snapshot(ref, 'PROCESSING'), {
    source: 'webhook',
    eventId: `${ref}-p`,
  });
  await store.writer.applyOrderSnapshot(snapshot(ref, 'SUCCESS'), { source: 'webhook', eventId: `${ref}-s` });
  await store.writer.applyOrderSnapshot(snapshot(ref, 'SUCCESS', { serial_number: `SN-${ref}` }), {
    source: 'poll',
  });
}

/**
 * What most notification tests start from: a cleanup scope, a store on a temp SQLite file on the
 * real clock (`dbPath`, for a worker process on it), a webhook sink (answering with `answer`,
 * default 200) and an endpoint on it for every order event, signed with `secret`.
 */
export async function notifySetup(
  t: Parameters<typeof cleanupScope>[0],
  answer?: (d: Omit<WebhookDelivery, 'answer'>) => SinkAnswer,
) {
  const scope = cleanupScope(t);
  const { store, path: dbPath } = await tempStore(scope, { now: Date.now });
  const sink = await startWebhookSink(scope, { secrets: [], ...(answer ? { answer } : {}) });
  const secret = generateEndpointSecret();
  const endpoint = await store.endpoints.add({ url: sink.url, events: ['order.*'], secret });
  return { scope, store, dbPath, sink, secret, endpoint };
}
