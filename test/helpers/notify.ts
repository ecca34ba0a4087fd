import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { TestContext } from 'node:test';
import { type Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { type Notifier, type NotifierOptions, startNotifier } from '../../src/notify/notifier.js';
import { NOTIFY_QUEUE, type NotifyJobData } from '../../src/notify/notify-queue.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { privateRedis } from './redis.js';
import { snapshot, tempStore } from './store.js';
import { waitFor } from './wait.js';
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
 * retries and dispatch, a 60 s POST timeout (a shop that hangs keeps its delivery in flight), and
 * a short job lock and stall check, so a killed worker's jobs are taken over soon.
 */
export function crashTestWorkerEnv(redisUrl: string, dbPath: string): Record<string, string> {
  return {
    REDIS_URL: redisUrl,
    H2H_DB_PATH: dbPath,
    ADMIN_PORT: '0',
    H2H_NOTIFY_TIMEOUT_MS: '60000',
    H2H_NOTIFY_RETRY_S: '0.05,0.1,0.2,0.5',
    H2H_NOTIFY_DISPATCH_EVERY_MS: '20',
    // A killed worker's successor takes over the dispatcher after at most a second.
    H2H_NOTIFY_LEASE_MS: '1000',
    H2H_WORKER_LOCK_DURATION_MS: '1000',
    H2H_WORKER_STALLED_INTERVAL_MS: '250',
  };
}

/** A notifier on `store` with short timings for tests, closed by `t.after`. */
export async function startTestNotifier(
  t: Pick<TestContext, 'after'>,
  options: { store: OrderStore; redisUrl: string } & Partial<NotifierOptions>,
): Promise<Notifier> {
  const notifier = await startNotifier({
    prefix: `t-${randomUUID()}`,
    dispatchEveryMs: 20,
    timeoutMs: 2_000,
    // More retries than any test fails in a row, so none gives up unless it asks for it.
    retryScheduleMs: [50, 100, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200],
    lockDurationMs: 1_000,
    stalledIntervalMs: 250,
    dispatchLeaseMs: 1_000,
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
 * What most notification tests start from: a cleanup scope, a private Redis, a store on a temp
 * SQLite file on the real clock (`dbPath`, for a worker process on it), a webhook sink (answering
 * with `answer`, default 200) and an endpoint on it for every order event, signed with `secret`.
 */
export async function notifySetup(
  t: Parameters<typeof cleanupScope>[0],
  answer?: (d: Omit<WebhookDelivery, 'answer'>) => SinkAnswer,
) {
  const scope = cleanupScope(t);
  const redis = await privateRedis(scope);
  const { store, path: dbPath } = await tempStore(scope, { now: Date.now });
  const sink = await startWebhookSink(scope, { secrets: [], ...(answer ? { answer } : {}) });
  const secret = generateEndpointSecret();
  const endpoint = await store.endpoints.add({ url: sink.url, events: ['order.*'], secret });
  return { scope, redis, store, dbPath, sink, secret, endpoint };
}

/**
 * Job `id` of `queue` once it has completed, read after its completion: a job read before it
 * keeps the values it had then (no return value yet).
 */
export async function completedJob<T>(queue: Queue<T>, id: string, message: string): Promise<Job<T>> {
  await waitFor(async () => (await queue.getJob(id))?.isCompleted(), { message });
  return (await queue.getJob(id))!;
}

/**
 * The notification queue under `prefix` on a connection of its own, as another process sees it;
 * closed by `t.after`.
 */
export function notifyQueue(t: Pick<TestContext, 'after'>, redisUrl: string, prefix: string) {
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const queue = new Queue<NotifyJobData>(NOTIFY_QUEUE, { connection, prefix });
  t.after(async () => {
    await queue.close();
    connection.disconnect();
  });
  return { queue, connection };
}
