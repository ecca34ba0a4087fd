import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { test } from 'node:test';
import { DirectDeliveries } from '../../src/notify/direct-delivery.js';
import { dispatchNotifications } from '../../src/notify/dispatcher.js';
import { createNotifyMetrics } from '../../src/notify/notify-metrics.js';
import { notifyJobId } from '../../src/notify/notify-queue.js';
import { RunningDeliveries, WaitMarks } from '../../src/notify/order-wait.js';
import { postNotification } from '../../src/notify/post-notification.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { DEFAULT_QUEUE_PREFIX } from '../../src/queue/webhook-queue.js';
import {
  crashTestWorkerEnv,
  liveOrder,
  notifyQueue,
  notifySetup,
  seqOf,
  startTestNotifier,
  verifyNotification,
} from '../helpers/notify.js';
import { freezableProxy } from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { tempStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { failFirst, startWebhookSink } from '../helpers/webhook-sink.js';
import { cleanupScope, spawnWorker } from '../helpers/worker.js';

/**
 * The dispatcher's own deliveries (src/notify/direct-delivery.ts): an event's first attempt is
 * made by the process that dispatches, without a job; a failed one becomes a job on the retry
 * schedule; one process dispatches at a time (the lease); a process that dies mid-delivery
 * leaves its unsettled events to the next.
 */

test('an order’s events are delivered by the dispatcher itself, in sequence, each recorded once as attempt 1, with no job', async (t) => {
  const { scope, redis, store, sink, secret, endpoint } = await notifySetup(t);
  const prefix = `t-${randomUUID()}`;
  const queue = notifyQueue(scope, redis.url, prefix).queue;
  await startTestNotifier(scope, { store, redisUrl: redis.url, prefix });

  await liveOrder(store, 'D-1'); // seq 1-4
  const delivered = await sink.waitForDeliveries((d) => d.answer === 200, 4);
  assert.deepEqual(delivered.map(seqOf), [1, 2, 3, 4]);
  assert.deepEqual(
    delivered.map((d) => verifyNotification(secret, d).data.version),
    [1, 2, 3, 4],
  );
  const history = await waitFor(async () => {
    const rows = await store.deliveries.history({ endpointId: endpoint.id });
    return rows.length === 4 ? rows : undefined;
  });
  assert.deepEqual(
    history.map((row) => [row.seq, row.attempt, row.outcome]).sort((a, b) => Number(a[0]) - Number(b[0])),
    [1, 2, 3, 4].map((seq) => [seq, 1, 'delivered']),
  );
  const jobs = await Promise.all([1, 2, 3, 4].map((seq) => queue.getJob(notifyJobId(endpoint.id, seq))));
  assert.deepEqual(
    jobs,
    [undefined, undefined, undefined, undefined],
    'no job for a first attempt answered 2xx',
  );
});

test('a failed first attempt becomes a job that retries on the schedule, its attempts numbered on; the order’s later events wait for it', async (t) => {
  const { scope, redis, store, sink, endpoint } = await notifySetup(t, failFirst(1, 503));
  const prefix = `t-${randomUUID()}`;
  const queue = notifyQueue(scope, redis.url, prefix).queue;
  await startTestNotifier(scope, { store, redisUrl: redis.url, prefix, retryScheduleMs: [100, 100] });

  await liveOrder(store, 'F-1'); // seq 1-4
  const delivered = await sink.waitForDeliveries((d) => d.answer === 200, 4);
  assert.deepEqual(delivered.map(seqOf), [1, 2, 3, 4], 'the later events after the retried one');
  assert.deepEqual(sink.deliveries.map((d) => [seqOf(d), d.answer]).slice(0, 2), [
    [1, 503],
    [1, 200],
  ]);
  const history = await waitFor(async () => {
    const rows = (await store.deliveries.history({ endpointId: endpoint.id })).filter((row) => row.seq === 1);
    return rows.length === 2 ? rows : undefined;
  });
  assert.deepEqual(
    history.map((row) => [row.attempt, row.outcome, row.status]).sort((a, b) => Number(a[0]) - Number(b[0])),
    [
      [1, 'retrying', 503],
      [2, 'delivered', 200],
    ],
  );
  const job = await queue.getJob(notifyJobId(endpoint.id, 1));
  assert.equal(job?.data.attemptsBefore, 1, 'the retry is a job that counts the first attempt');
  assert.equal(job?.opts.attempts, 2, 'one attempt fewer than the schedule gives a job of its own');
});

test('two notifiers on one queue: one dispatches (the lease), so every event reaches the shop exactly once', async (t) => {
  const { scope, redis, store, sink } = await notifySetup(t);
  const prefix = `t-${randomUUID()}`;
  await startTestNotifier(scope, { store, redisUrl: redis.url, prefix });
  await startTestNotifier(scope, { store, redisUrl: redis.url, prefix });

  for (let i = 0; i < 5; i++) await liveOrder(store, `L-${i}`); // seq 1-20
  const delivered = await sink.waitForDeliveries((d) => d.answer === 200, 20);
  assert.deepEqual(
    delivered.map(seqOf).sort((a, b) => a - b),
    Array.from({ length: 20 }, (_, i) => i + 1),
  );
  // A second delivery of one of them would have come by the time a later order's events have.
  await liveOrder(store, 'L-last'); // seq 21-24
  await sink.waitForDeliveries((d) => d.answer === 200, 24);
  assert.equal(sink.deliveries.length, 24, 'no event sent twice');
});

test('a notifier that stops hands the dispatcher over at once: the other delivers without waiting for the lease to run out', async (t) => {
  const { scope, redis, store, sink } = await notifySetup(t);
  const prefix = `t-${randomUUID()}`;
  // A lease far longer than the test's waits: only a release lets the second notifier dispatch.
  const first = await startTestNotifier(scope, {
    store,
    redisUrl: redis.url,
    prefix,
    dispatchLeaseMs: 120_000,
  });
  await liveOrder(store, 'H-1'); // seq 1-4
  await sink.waitForDeliveries((d) => d.answer === 200, 4);
  await startTestNotifier(scope, { store, redisUrl: redis.url, prefix, dispatchLeaseMs: 120_000 });
  assert.equal(await first.close(), true);

  await liveOrder(store, 'H-2'); // seq 5-8
  const delivered = await sink.waitForDeliveries((d) => d.answer === 200, 8);
  assert.deepEqual(delivered.map(seqOf), [1, 2, 3, 4, 5, 6, 7, 8]);
});

test('a worker killed while the shop has not answered its delivery: the next start sends that event again and the rest once, in sequence', async (t) => {
  let up = false;
  const { scope, redis, store, dbPath, sink, secret, endpoint } = await notifySetup(t, () =>
    up ? 200 : 'hang',
  );
  const env = crashTestWorkerEnv(redis.url, dbPath);
  const { child } = await spawnWorker(scope, env);
  await liveOrder(store, 'K-1'); // seq 1-4
  await sink.waitForDeliveries(() => true, 1);
  const killed = once(child, 'exit');
  child.kill('SIGKILL');
  assert.equal((await killed)[1], 'SIGKILL');
  assert.deepEqual(sink.deliveries.map(seqOf), [1], 'events 2-4 wait for event 1');

  up = true;
  await spawnWorker(scope, env);
  const delivered = await sink.waitForDeliveries((d) => d.answer === 200, 4);
  assert.deepEqual(delivered.map(seqOf), [1, 2, 3, 4]);
  assert.deepEqual(
    delivered.map((d) => verifyNotification(secret, d).data.version),
    [1, 2, 3, 4],
  );
  assert.deepEqual(
    sink.deliveries.map(seqOf),
    [1, 1, 2, 3, 4],
    'event 1 again (it had no answer), the rest once',
  );
  const history = await waitFor(async () => {
    const rows = await store.deliveries.history({ endpointId: endpoint.id });
    return rows.length === 4 ? rows : undefined;
  });
  assert.deepEqual(
    history.map((row) => [row.seq, row.outcome]).sort((a, b) => Number(a[0]) - Number(b[0])),
    [1, 2, 3, 4].map((seq) => [seq, 'delivered']),
  );
  // The queue under the worker's prefix holds no job for them either.
  const queue = notifyQueue(scope, redis.url, DEFAULT_QUEUE_PREFIX).queue;
  assert.equal(await queue.getJob(notifyJobId(endpoint.id, 2)), undefined);
});

test('the dispatcher writes an endpoint’s cursor only up to the first event its own deliveries have not settled', async (t) => {
  const scope = cleanupScope(t);
  const redis = await privateRedis(scope);
  const { store } = await tempStore(scope, { now: Date.now });
  let answer!: () => void;
  const answered = new Promise<void>((resolve) => {
    answer = resolve;
  });
  // The shop holds its answer to event 1 until the test lets it go.
  const sink = await startWebhookSink(scope, {
    secrets: [],
    hold: (d) => (seqOf(d) === 1 ? answered : undefined),
  });
  const endpoint = await store.endpoints.add({
    url: sink.url,
    events: ['order.*'],
    secret: generateEndpointSecret(),
  });
  const { queue, connection } = notifyQueue(scope, redis.url, `t-${randomUUID()}`);
  const direct = new DirectDeliveries({
    deps: {
      store,
      queue,
      running: new RunningDeliveries(),
      marks: new WaitMarks(connection, queue.qualifiedName),
      metrics: createNotifyMetrics(),
      now: Date.now,
      post: (url, headers, body) => postNotification(url, headers, body, { timeoutMs: 10_000 }),
    },
    scheduleMs: [100],
    limit: 10,
  });
  const cursor = async () => (await store.endpoints.get(endpoint.id))!.cursor;

  await liveOrder(store, 'C-1'); // seq 1-4
  // The notifier's way: the cursor in memory, written to the store (dispatcher.ts).
  const memory = new Map();
  const pass = () =>
    dispatchNotifications(store, queue, {
      retries: 1,
      memory,
      direct: { deliveries: direct, recoverUpTo: 0 },
    });
  assert.equal(await pass(), 4, 'four events taken');
  await sink.waitForDeliveries(() => true, 1);
  await pass();
  assert.equal(await cursor(), 0, 'event 1 is unanswered: a process dying now must read it again');

  answer();
  const delivered = await sink.waitForDeliveries((d) => d.answer === 200, 4);
  assert.deepEqual(delivered.map(seqOf), [1, 2, 3, 4]);
  await waitFor(() => direct.inFlight === 0, { message: 'the four settled' });
  assert.equal(await pass(), 0, 'nothing new');
  assert.equal(await cursor(), 4, 'all four settled: the cursor moves past them');
  await direct.drain();
});

test('a dispatcher cut off from Redis stops sending once its lease may have run out: the one that took over sends each event once', async (t) => {
  const { scope, redis, store, sink } = await notifySetup(t);
  const prefix = `t-${randomUUID()}`;
  const proxy = await freezableProxy(scope, redis);
  // The first notifier reaches Redis through the proxy; the test helper's lease is 1 s.
  await startTestNotifier(scope, { store, redisUrl: proxy.url, prefix });
  await liveOrder(store, 'Z-1'); // seq 1-4
  await sink.waitForDeliveries((d) => d.answer === 200, 4);
  const { queue, connection } = notifyQueue(scope, redis.url, prefix);
  const leaseKey = `${queue.qualifiedName}:dispatcher`;
  const firstHolder = await connection.get(leaseKey);
  assert.ok(firstHolder, 'the first notifier holds the lease');
  await startTestNotifier(scope, { store, redisUrl: redis.url, prefix });

  // Its Redis stops answering: its renewals hang, neither failing nor succeeding.
  proxy.freeze();
  await waitFor(
    async () => {
      const holder = await connection.get(leaseKey);
      return holder !== null && holder !== firstHolder;
    },
    { message: 'the second notifier took the lease once it ran out' },
  );
  await liveOrder(store, 'Z-2'); // seq 5-8
  await liveOrder(store, 'Z-3'); // seq 9-12
  await waitFor(() => new Set(sink.deliveries.map(seqOf)).size === 12, { message: 'events 1-12 received' });
  await liveOrder(store, 'Z-4'); // seq 13-16: a double of 5-12 would have come by now
  await waitFor(() => new Set(sink.deliveries.map(seqOf)).size === 16, { message: 'events 13-16 received' });
  assert.equal(sink.deliveries.length, 16, 'no event sent by both notifiers');
});
