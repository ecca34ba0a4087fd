import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { type TestContext, test } from 'node:test';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { deliverNotification, releaseSuccessor } from '../../src/notify/deliver-notification.js';
import { DeliveredRecords } from '../../src/notify/delivered-records.js';
import { dispatchNotifications } from '../../src/notify/dispatcher.js';
import type { NotifierOptions } from '../../src/notify/notifier.js';
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
import { otherConnection, tempStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { spawnWorker } from '../helpers/worker.js';

/**
 * A delivery's record is written after its job completes (src/notify/delivered-records.ts); the
 * 2xx is noted in Redis first, so a worker that dies before the record is durable loses nothing
 * and sends nothing twice.
 */

test('a worker killed after the shop’s 2xx and before the records are durable: the next start records each once, nothing is sent again', async (t) => {
  const { scope, redis, store, dbPath, sink, endpoint } = await notifySetup(t);
  await liveOrder(store, 'R-1'); // seq 1-4
  const env = crashTestWorkerEnv(redis.url, dbPath);
  const { child } = await spawnWorker(scope, env);

  // Another process holds the store's write lock: no record can be written meanwhile, and the
  // deliveries go on all the same, in sequence.
  const locker = await otherConnection(dbPath);
  scope.after(() => locker.close());
  locker.exec('BEGIN IMMEDIATE');
  const delivered = await sink.waitForDeliveries((d) => d.answer === 200, 4);
  assert.deepEqual(delivered.map(seqOf), [1, 2, 3, 4]);

  const connection = new Redis(redis.url);
  scope.after(() => connection.disconnect());
  const notes = `${DEFAULT_QUEUE_PREFIX}:${NOTIFY_QUEUE}:unrecorded`;
  const noteIds = [1, 2, 3, 4].map((seq) => notifyJobId(endpoint.id, seq));
  await waitFor(
    async () => {
      const noted = await connection.hkeys(notes);
      return noteIds.every((id) => noted.includes(id));
    },
    { message: 'the four 2xx noted, no record written' },
  );
  const killed = once(child, 'exit');
  child.kill('SIGKILL');
  assert.equal((await killed)[1], 'SIGKILL');
  assert.equal((await store.deliveries.history({ endpointId: endpoint.id })).length, 0, 'nothing recorded');
  locker.exec('ROLLBACK');

  await spawnWorker(scope, env);
  const history = await waitFor(
    async () => {
      const rows = await store.deliveries.history({ endpointId: endpoint.id });
      return rows.length === 4 ? rows : undefined;
    },
    { message: 'the four deliveries recorded by the next start' },
  );
  assert.deepEqual(
    history.map((row) => [row.seq, row.outcome, row.status]).sort((a, b) => Number(a[0]) - Number(b[0])),
    [1, 2, 3, 4].map((seq) => [seq, 'delivered', 200]),
  );
  await waitFor(async () => (await connection.hlen(notes)) === 0, { message: 'the notes deleted' });
  assert.equal(sink.deliveries.length, 4, 'each event was sent once');
});

/**
 * A worker process that dies after the shop's 2xx to the first of order T-1's four events was
 * noted, before that attempt's record was durable and before its job completed. The notifier
 * (with `notifierOptions`) runs already: its start-up sweep found no note, the realistic case of
 * a live worker that takes over.
 */
async function diesAfterNoting(
  t: TestContext,
  notifierOptions: Partial<NotifierOptions> = {},
  { completesJob = false } = {},
) {
  const { scope, redis, store, sink, secret, endpoint } = await notifySetup(t);
  await liveOrder(store, 'T-1'); // seq 1-4
  const prefix = `t-${randomUUID()}`;
  const first = notifyJobId(endpoint.id, 1);
  const second = notifyJobId(endpoint.id, 2);

  const observer = new Redis(redis.url);
  scope.after(() => observer.disconnect());

  // The process that dies: it queues the order's four events as the dispatcher does and takes
  // the first one's job (a worker without a processor: its lock is never extended).
  const { queue, connection } = notifyQueue(scope, redis.url, prefix);
  assert.equal(await dispatchNotifications(store, queue, { retries: 3 }), 4);
  const dying = new Worker<NotifyJobData>(NOTIFY_QUEUE, null, { connection, prefix, lockDuration: 60_000 });
  scope.after(() => dying.close(true));
  const token = randomUUID();
  const job = await dying.getNextJob(token, { block: false });
  assert.equal(job?.id, first);

  // The other worker runs already (its start-up sweep found no note: the realistic case, a live
  // worker taking over), and the order's next event waits, delayed, for the first.
  const notifier = await startTestNotifier(scope, { store, redisUrl: redis.url, prefix, ...notifierOptions });
  const marks = new WaitMarks(connection, queue.qualifiedName);
  await waitFor(
    async () => (await new WaitMarks(observer, queue.qualifiedName).waiting(endpoint.id, 1)) === second,
    {
      message: 'the second event waiting for the first',
    },
  );

  // The dying process delivers: the shop answers 2xx, the 2xx is noted, and its record is never
  // durable (the process dies before the write).
  const records = new DeliveredRecords({
    redis: connection,
    keyPrefix: queue.qualifiedName,
    record: () => new Promise(() => {}),
    onRecorded: (attempt, event) =>
      releaseSuccessor({ marks, queue, store }, attempt.endpointId, attempt.seq, event),
    maxPending: 100,
  });
  const result = await deliverNotification(
    {
      store,
      queue,
      running: new RunningDeliveries(),
      marks,
      delivered: records,
      post: (url, headers, body) => postNotification(url, headers, body, { timeoutMs: 10_000 }),
      metrics: createNotifyMetrics(),
      now: Date.now,
    },
    job!,
    token,
  );
  assert.equal(result, 'delivered');
  assert.deepEqual(sink.deliveries.map(seqOf), [1]);
  const noted = await records.find(first);
  assert.equal(noted?.status, 200);
  assert.equal((await store.deliveries.history({ endpointId: endpoint.id })).length, 0, 'nothing recorded');

  if (completesJob) {
    // It completes the job, and dies before the record: no run of the job is left to write it.
    await job!.moveToCompleted('delivered', token, false);
  } else {
    // It dies: its job never completes, its lock runs out (now, rather than in its 60 s), and
    // the other worker's stalled-job check moves the job back to wait.
    assert.equal(await job!.extendLock(token, 1), 1);
  }
  await dying.close(true);
  await queue.close();
  connection.disconnect();

  return { store, sink, secret, endpoint, notifier, observer, prefix, first, noted };
}

test('a job taken over after its 2xx was noted and before its record: its run records the noted attempt once and sends nothing again; the order’s next events follow in sequence', async (t) => {
  const { store, sink, secret, endpoint, notifier, observer, prefix, first, noted } =
    await diesAfterNoting(t);
  const completed = await completedJob(
    notifier.queue,
    first,
    'the first event’s job completed by the other worker',
  );
  assert.ok(completed.stalledCounter >= 1, 'taken over as stalled');
  assert.equal(completed.returnvalue, 'delivered');
  const history = await waitFor(
    async () => {
      const rows = await store.deliveries.history({ endpointId: endpoint.id });
      return rows.length === 4 ? rows : undefined;
    },
    { message: 'the four events recorded' },
  );
  await waitFor(
    async () => {
      const jobs = await Promise.all(
        [1, 2, 3, 4].map((seq) => notifier.queue.getJob(notifyJobId(endpoint.id, seq))),
      );
      return (await Promise.all(jobs.map((j) => j?.isCompleted()))).every(Boolean);
    },
    { message: 'the four jobs completed' },
  );
  const notes = `${prefix}:${NOTIFY_QUEUE}:unrecorded`;
  await waitFor(async () => (await observer.hlen(notes)) === 0, { message: 'the notes deleted' });

  // The first event was sent once, by the process that died; its row is the noted attempt.
  assert.deepEqual(
    sink.deliveries.map((d) => [seqOf(d), d.answer]),
    [1, 2, 3, 4].map((seq) => [seq, 200]),
    'each event sent once, in sequence',
  );
  assert.deepEqual(
    sink.deliveries.map((d) => verifyNotification(secret, d).data.version),
    [1, 2, 3, 4],
  );
  const rowOfFirst = history.filter((row) => row.seq === 1);
  assert.equal(rowOfFirst.length, 1);
  const { id: _id, ...attempt } = rowOfFirst[0]!;
  assert.deepEqual(attempt, noted);
  assert.deepEqual(
    history.map((row) => [row.seq, row.outcome]).sort((a, b) => Number(a[0]) - Number(b[0])),
    [1, 2, 3, 4].map((seq) => [seq, 'delivered']),
  );
});

test('a process that completed the job of a 2xx and died before its record holds up nothing: the order’s next events go on its note, without waiting for a sweep', async (t) => {
  // The live notifier's sweep of such notes runs every 30 s, for notes older than that: the
  // waits below (10 s) end long before it.
  const { store, sink, secret, endpoint, observer, prefix, first } = await diesAfterNoting(
    t,
    {},
    { completesJob: true },
  );
  const delivered = await sink.waitForDeliveries((d) => d.answer === 200, 4);
  assert.deepEqual(delivered.map(seqOf), [1, 2, 3, 4], 'each event sent once, in sequence');
  assert.deepEqual(
    delivered.map((d) => verifyNotification(secret, d).data.version),
    [1, 2, 3, 4],
  );
  // The first event's row is still the sweep's to write; the note says it was delivered.
  const notes = `${prefix}:${NOTIFY_QUEUE}:unrecorded`;
  assert.equal(await observer.hexists(notes, first), 1, 'the note kept until a sweep records it');
  const rows = await waitFor(
    async () => {
      const history = await store.deliveries.history({ endpointId: endpoint.id });
      return history.length >= 3 ? history : undefined;
    },
    { message: 'the next three events recorded' },
  );
  assert.deepEqual(
    rows.map((row) => row.seq).sort((a, b) => a - b),
    [2, 3, 4],
  );
});

test('a job that fails for good after its 2xx was noted (stalled past its limit) is recorded delivered from its note, not given up; the order’s next events follow', async (t) => {
  // No stall allowed: the notifier's stalled check fails the job for good instead of running it.
  const { store, sink, endpoint, notifier, first, noted } = await diesAfterNoting(t, { maxStalledCount: 0 });
  await waitFor(async () => (await notifier.queue.getJob(first))?.isFailed(), {
    message: 'the first event’s job failed for good (stalled)',
  });
  const history = await waitFor(
    async () => {
      const rows = await store.deliveries.history({ endpointId: endpoint.id });
      return rows.length === 4 ? rows : undefined;
    },
    { message: 'the four events recorded' },
  );
  const rowsOfFirst = history.filter((row) => row.seq === 1);
  assert.equal(rowsOfFirst.length, 1, 'one row for the first event');
  const { id: _id, ...attempt } = rowsOfFirst[0]!;
  assert.deepEqual(attempt, noted, 'the noted 2xx, not gave_up');
  assert.deepEqual(
    history.map((row) => [row.seq, row.outcome]).sort((a, b) => Number(a[0]) - Number(b[0])),
    [1, 2, 3, 4].map((seq) => [seq, 'delivered']),
  );
  assert.deepEqual(sink.deliveries.map(seqOf), [1, 2, 3, 4], 'each event sent once, in sequence');
});

test('an attempt is recorded once: the same attempt written again (a sweep beside the live writer) returns the first row', async (t) => {
  const { store } = await tempStore(t);
  const endpoint = await store.endpoints.add({
    url: 'http://127.0.0.1:9/hook',
    events: ['order.*'],
    secret: generateEndpointSecret(),
  });
  await liveOrder(store, 'O-1');
  const attempt = {
    endpointId: endpoint.id,
    seq: 1,
    type: 'order.submitted',
    partnerRef: 'O-1',
    attempt: 1,
    requestedAt: 1_000,
    status: 200,
    durationMs: 3,
    error: null,
    outcome: 'delivered' as const,
  };
  const first = await store.deliveries.record(attempt);
  const [again] = await store.deliveries.recordBatch([attempt]);
  assert.deepEqual(again, { ok: true, value: first });
  // Another attempt of the same event (a replay, a later try) is a row of its own.
  const replay = await store.deliveries.record({ ...attempt, requestedAt: 2_000 });
  assert.notEqual(replay.id, first.id);
  assert.equal((await store.deliveries.history({ endpointId: endpoint.id })).length, 2);
});
