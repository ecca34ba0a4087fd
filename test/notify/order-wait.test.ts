import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { test } from 'node:test';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { deliverNotification } from '../../src/notify/deliver-notification.js';
import { dispatchNotifications } from '../../src/notify/dispatcher.js';
import { createNotifyMetrics } from '../../src/notify/notify-metrics.js';
import { NOTIFY_QUEUE, type NotifyJobData, notifyJobId } from '../../src/notify/notify-queue.js';
import { RunningDeliveries, WaitMarks } from '../../src/notify/order-wait.js';
import { postNotification } from '../../src/notify/post-notification.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { DEFAULT_QUEUE_PREFIX } from '../../src/queue/webhook-queue.js';
import {
  completedJob,
  crashTestWorkerEnv,
  liveOrder,
  notifyQueue,
  notifySetup,
  seqOf,
  startTestNotifier,
  verifyNotification,
} from '../helpers/notify.js';
import { privateRedis } from '../helpers/redis.js';
import { openTestStore, scheduleSettings, tempDbPath, tempStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import { cleanupScope, spawnWorker } from '../helpers/worker.js';

/**
 * How a later event of an order waits for its earlier one (src/notify/order-wait.ts): in the
 * process delivering the earlier one it awaits that run (the hand-off); anywhere else it waits
 * delayed, and a mark in Redis lets the earlier delivery promote it.
 */

/** A gate the test opens: a shop still answering until then. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** A queue of the notification queue under `prefix`, closed at the end. */

/**
 * A store, a private Redis, a shop that holds its answer to the first delivery until `first.open()`,
 * its endpoint, and a queue under a fresh prefix: the setting of the waits below.
 */
async function shopHoldingFirst(t: Parameters<typeof cleanupScope>[0]) {
  const scope = cleanupScope(t);
  const redis = await privateRedis(scope);
  const { store } = await tempStore(scope, { now: Date.now });
  const first = gate();
  const sink = await startWebhookSink(scope, {
    secrets: [],
    hold: (delivery) => (delivery.index === 0 ? first.opened : undefined),
  });
  const secret = generateEndpointSecret();
  const endpoint = await store.endpoints.add({ url: sink.url, events: ['order.*'], secret });
  const prefix = `t-${randomUUID()}`;
  return {
    scope,
    redis,
    store,
    first,
    sink,
    secret,
    endpoint,
    prefix,
    ...notifyQueue(scope, redis.url, prefix),
  };
}

/** Each order's versions in the order the shop received them (2xx only). */
function versionsByRef(secret: string, deliveries: Parameters<typeof verifyNotification>[1][]) {
  const byRef = new Map<string, number[]>();
  for (const delivery of deliveries) {
    const body = verifyNotification(secret, delivery);
    byRef.set(body.data.partner_ref, [...(byRef.get(body.data.partner_ref) ?? []), body.data.version]);
  }
  return byRef;
}

test('the later events of an order await the earlier one delivered by the same process: in sequence, none moved to delayed', async (t) => {
  const { scope, redis, store, first, sink, secret, endpoint, prefix, queue } = await shopHoldingFirst(t);
  // Every delivery a job (H2H_NOTIFY_DIRECT=false), as a retry or a backlog's are.
  await startTestNotifier(scope, {
    store,
    redisUrl: redis.url,
    prefix,
    concurrency: 10,
    directDeliveries: false,
  });

  await liveOrder(store, 'H-1'); // seq 1-4
  await sink.waitForDeliveries(() => true, 1);
  // The shop has not answered the first: the other three are taken, and wait in the process.
  await waitFor(
    async () => {
      const jobs = await Promise.all([2, 3, 4].map((seq) => queue.getJob(notifyJobId(endpoint.id, seq))));
      const active = await Promise.all(jobs.map((job) => job?.isActive()));
      return active.every(Boolean);
    },
    { message: 'the jobs of events 2-4 active while event 1 is unanswered' },
  );
  assert.equal(sink.deliveries.length, 1, 'nothing else sent while the first is unanswered');

  first.open();
  const delivered = await sink.waitForDeliveries((d) => d.answer === 200, 4);
  assert.deepEqual(delivered.map(seqOf), [1, 2, 3, 4]);
  assert.deepEqual(versionsByRef(secret, delivered).get('H-1'), [1, 2, 3, 4]);
  for (const seq of [1, 2, 3, 4]) {
    const job = await completedJob(queue, notifyJobId(endpoint.id, seq), `job of event ${seq} completed`);
    assert.equal(job.returnvalue, 'delivered');
    assert.equal(job.data.waits, undefined, `event ${seq} never moved to delayed`);
  }
  // Each record is written just after its job completed (src/notify/delivered-records.ts).
  await waitFor(async () => (await store.deliveries.history({ endpointId: endpoint.id })).length === 4, {
    message: 'four deliveries recorded',
  });
});

test('a later event waiting delayed for an earlier one delivered by another process is promoted through its mark', async (t) => {
  const { scope, redis, store, first, sink, endpoint, prefix, queue, connection } = await shopHoldingFirst(t);

  await liveOrder(store, 'M-1'); // seq 1-4
  await dispatchNotifications(store, queue, { retries: 3 });
  // Another process takes event 1 (the oldest job) and delivers it with the same code.
  const marks = new WaitMarks(connection, queue.qualifiedName);
  const otherDeps = {
    store,
    queue,
    running: new RunningDeliveries(),
    marks,
    metrics: createNotifyMetrics(),
    now: Date.now,
    post: (url: string, headers: Record<string, string>, body: string) =>
      postNotification(url, headers, body, { timeoutMs: 10_000 }),
  };
  const otherConnection = new Redis(redis.url, { maxRetriesPerRequest: null });
  const other = new Worker<NotifyJobData>(
    NOTIFY_QUEUE,
    (job, token) => deliverNotification(otherDeps, job, token),
    { connection: otherConnection, prefix, autorun: false },
  );
  scope.after(async () => {
    await other.close(true);
    otherConnection.disconnect();
  });
  const taken = new Promise<void>((resolve) => other.once('active', () => resolve()));
  void other.run();
  await taken;
  // It took event 1 and waits for the shop; it takes nothing more until then (concurrency 1).
  await sink.waitForDeliveries(() => true, 1);
  assert.equal(seqOf(sink.deliveries[0]!), 1);

  await startTestNotifier(scope, { store, redisUrl: redis.url, prefix });
  const mark = await waitFor(
    async () => {
      const job = await queue.getJob(notifyJobId(endpoint.id, 2));
      return (await job?.isDelayed()) ? ((await marks.waiting(endpoint.id, 1)) ?? undefined) : undefined;
    },
    { message: 'event 2 delayed, marked as waiting for event 1' },
  );
  assert.equal(mark, notifyJobId(endpoint.id, 2));
  assert.equal(sink.deliveries.length, 1, 'nothing else sent while event 1 is unanswered');

  first.open();
  const delivered = await sink.waitForDeliveries((d) => d.answer === 200, 4);
  assert.deepEqual(delivered.map(seqOf), [1, 2, 3, 4]);
  assert.equal(await marks.waiting(endpoint.id, 1), null, 'the delivery of event 1 took the mark');
});

test('a worker killed while the later events of an order await the earlier one loses none: each arrives once, in sequence', async (t) => {
  const scope = cleanupScope(t);
  const redis = await privateRedis(scope);
  const dbPath = tempDbPath(scope);
  const store = await openTestStore(dbPath, scheduleSettings(), { now: Date.now });
  scope.after(() => store.close());
  let up = false;
  const sink = await startWebhookSink(scope, { secrets: [], answer: () => (up ? 200 : 'hang') });
  const secret = generateEndpointSecret();
  const endpoint = await store.endpoints.add({ url: sink.url, events: ['order.*'], secret });
  const { queue } = notifyQueue(scope, redis.url, DEFAULT_QUEUE_PREFIX);
  // Every delivery a job: the dispatcher's own deliveries have their test in direct-delivery.test.ts.
  const env = { ...crashTestWorkerEnv(redis.url, dbPath), H2H_NOTIFY_DIRECT: 'false' };

  const { child } = await spawnWorker(scope, env);
  await liveOrder(store, 'X-1'); // seq 1-4
  await sink.waitForDeliveries(() => true, 1);
  await waitFor(
    async () => {
      const jobs = await Promise.all([2, 3, 4].map((seq) => queue.getJob(notifyJobId(endpoint.id, seq))));
      return (await Promise.all(jobs.map((job) => job?.isActive()))).every(Boolean);
    },
    { message: 'events 2-4 awaiting event 1 in the worker' },
  );
  const killed = once(child, 'exit');
  child.kill('SIGKILL');
  assert.equal((await killed)[1], 'SIGKILL');
  assert.deepEqual(sink.deliveries.map(seqOf), [1], 'only event 1 was sent before the kill');

  up = true;
  await spawnWorker(scope, env);
  const delivered = await sink.waitForDeliveries((d) => d.answer === 200, 4, { timeoutMs: 20_000 });
  assert.deepEqual(delivered.map(seqOf), [1, 2, 3, 4]);
  assert.deepEqual(versionsByRef(secret, delivered).get('X-1'), [1, 2, 3, 4]);
  const history = await waitFor(
    async () => {
      const rows = await store.deliveries.history({ endpointId: endpoint.id });
      return rows.filter((row) => row.outcome === 'delivered').length === 4 ? rows : undefined;
    },
    { message: 'four deliveries recorded' },
  );
  assert.deepEqual(
    history.map((row) => row.seq).sort((a, b) => a - b),
    [1, 2, 3, 4],
  );
});

test('jobs awaiting an earlier event at a slow endpoint leave worker slots to the other endpoints', async (t) => {
  const scope = cleanupScope(t);
  const redis = await privateRedis(scope);
  const { store } = await tempStore(scope, { now: Date.now });
  const first = gate();
  // The slow shop does not answer event 1 until the end; its events 2-4 wait for it.
  const slow = await startWebhookSink(scope, {
    secrets: [],
    hold: (delivery) => (delivery.index === 0 ? first.opened : undefined),
  });
  const fast = await startWebhookSink(scope, { secrets: [] });
  await store.endpoints.add({ url: slow.url, events: ['order.*'], secret: generateEndpointSecret() });
  await store.endpoints.add({ url: fast.url, events: ['order.*'], secret: generateEndpointSecret() });
  await liveOrder(store, 'S-1'); // seq 1-4, to both endpoints
  const prefix = `t-${randomUUID()}`;
  // Neither the POST nor a hand-off gives up during the test: only the bound on waiters frees slots.
  const patient = { timeoutMs: 120_000, handOffMaxWaitMs: 120_000 };
  await startTestNotifier(scope, { store, redisUrl: redis.url, prefix, concurrency: 3, ...patient });
  await slow.waitForDeliveries(() => true, 1);
  // Three slots: event 1 holds one at the slow shop. Unbounded, its events 2 and 3 held the other
  // two, awaiting it, and the fast shop got nothing until the slow one answered.
  const delivered = await fast.waitForDeliveries((d) => d.answer === 200, 4);
  assert.deepEqual(delivered.map(seqOf), [1, 2, 3, 4]);
  assert.equal(slow.deliveries.length, 1, 'the slow shop still holds event 1; nothing after it was sent');
  first.open();
  assert.deepEqual((await slow.waitForDeliveries((d) => d.answer === 200, 4)).map(seqOf), [1, 2, 3, 4]);
});

test('a job whose event is already recorded delivered sends nothing again (a run taken over after its record)', async (t) => {
  const { scope, redis, store, sink, endpoint } = await notifySetup(t);
  await liveOrder(store, 'D-1'); // seq 1-4
  // Event 1 was delivered and recorded by a run whose job then stalled: its job runs again.
  await store.deliveries.record({
    endpointId: endpoint.id,
    seq: 1,
    type: 'order.created',
    partnerRef: 'D-1',
    attempt: 1,
    requestedAt: Date.now(),
    status: 200,
    durationMs: 5,
    error: null,
    outcome: 'delivered',
  });
  const prefix = `t-${randomUUID()}`;
  const { queue } = notifyQueue(scope, redis.url, prefix);
  await startTestNotifier(scope, { store, redisUrl: redis.url, prefix, directDeliveries: false });
  const delivered = await sink.waitForDeliveries((d) => d.answer === 200, 3);
  assert.deepEqual(delivered.map(seqOf), [2, 3, 4]);
  const job = await completedJob(queue, notifyJobId(endpoint.id, 1), 'the job of event 1 completed');
  assert.equal(job.returnvalue, 'delivered');
  assert.equal(sink.deliveries.filter((d) => seqOf(d) === 1).length, 0, 'event 1 was not sent again');
});
