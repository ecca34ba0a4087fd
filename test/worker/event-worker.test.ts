import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { WebhookProducer } from '../../src/queue/webhook-producer.js';
import { createEventWorker } from '../../src/worker/event-worker.js';
import { privateRedis } from '../helpers/redis.js';
import {
  openTestStore,
  otherConnection,
  scheduleSettings,
  snapshot,
  tempDbPath,
  tempStore,
} from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import {
  cleanupScope,
  queueSnapshot,
  queueWebhook,
  startTestWorker,
  testProducer,
  webhookBodyOf,
} from '../helpers/worker.js';

/** Waits until the webhook job `jobId` is in `state`; returns the job. */
async function jobIn(producer: WebhookProducer, jobId: string, state: 'completed' | 'failed' | 'delayed') {
  return waitFor(
    async () => {
      // The state first, then the job: a job read before it finished carries no return value.
      if ((await producer.webhookQueue.getJobState(jobId)) !== state) return undefined;
      return producer.webhookQueue.getJob(jobId);
    },
    { message: `job ${jobId} ${state}` },
  );
}

const jobIdOf = (eventId: string) => `ev-${eventId}`;

async function setup(test: Parameters<typeof privateRedis>[0]) {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  const producer = await testProducer(t, redis.url);
  // The test's own store on the file, as the CLI or the order placement would have, and a plain
  // connection of another process (to read rows, or to hold the write lock).
  const store = await openTestStore(dbPath, scheduleSettings());
  t.after(() => store.close());
  const db = await otherConnection(dbPath);
  t.after(() => db.close());
  return { t, redis, dbPath, producer, db, store };
}

test('a queued webhook moves its order; a duplicate event id and an older state are recorded but change nothing', async (t) => {
  const { t: scope, redis, dbPath, producer, store } = await setup(t);
  await store.writer.createLocalOrder({
    partnerRef: 'known-1',
    productCode: 'ML86',
    data: { user_id: '12345678', server_id: '2001' },
  });
  await store.writer.applyOrderSnapshot(snapshot('known-1', 'PENDING'), { source: 'create' });
  await startTestWorker(scope, { redisUrl: redis.url, dbPath });

  const processing = await queueSnapshot(producer, snapshot('known-1', 'PROCESSING'));
  await jobIn(producer, jobIdOf(processing), 'completed');
  assert.equal((await store.queries.getOrder('known-1'))?.status, 'PROCESSING');

  const success = snapshot('known-1', 'SUCCESS', { serial_number: 'SN-1' });
  const successId = await queueSnapshot(producer, success);
  const done = await jobIn(producer, jobIdOf(successId), 'completed');
  assert.deepEqual(done.returnvalue, {
    partnerRef: 'known-1',
    status: 'SUCCESS',
    changed: true,
    reason: 'transition',
    duplicate: false,
    created: false,
  });

  // The queue forgets a completed job after its retention (48 h); the same event delivered
  // again then reaches the worker, and order_events stops it.
  await done.remove();
  await queueSnapshot(producer, success, successId);
  const again = await jobIn(producer, jobIdOf(successId), 'completed');
  assert.equal(again.returnvalue.duplicate, true);

  const late = await queueSnapshot(producer, snapshot('known-1', 'PENDING'));
  await jobIn(producer, jobIdOf(late), 'completed');

  const order = (await store.queries.getOrder('known-1'))!;
  assert.deepEqual([order.status, order.serialNumber], ['SUCCESS', 'SN-1']);
  assert.deepEqual(
    (await store.queries.listEvents('known-1')).map((e) => [
      e.source,
      e.eventId,
      e.status,
      e.changed,
      e.reason,
    ]),
    [
      ['create', null, 'PENDING', true, 'initial'],
      ['webhook', processing, 'PROCESSING', true, 'transition'],
      ['webhook', successId, 'SUCCESS', true, 'transition'],
      ['webhook', late, 'PENDING', false, 'not_allowed'],
    ],
  );
  const recorded = (await store.queries.listEvents('known-1'))[2]!;
  assert.equal((recorded.payload as { event_id: string }).event_id, successId, 'the whole body is kept');
});

test('a webhook for an order unknown locally creates it; without an event id header the event_id of the signed body is its event id', async (t) => {
  const { t: scope, redis, dbPath, producer, store } = await setup(t);
  await startTestWorker(scope, { redisUrl: redis.url, dbPath });

  const body = webhookBodyOf(snapshot('elsewhere-1', 'SUCCESS', { serial_number: 'SN-E' }), 'evt_in_body');
  const jobId = await queueWebhook(producer, body, null);
  const job = await jobIn(producer, jobId, 'completed');
  assert.equal(job.returnvalue.created, true);

  const order = (await store.queries.getOrder('elsewhere-1'))!;
  assert.deepEqual(
    [order.status, order.serialNumber, order.submissionState, order.invoiceNumber],
    ['SUCCESS', 'SN-E', 'accepted', 'INV-elsewhere-1'],
  );
  assert.deepEqual(
    (await store.queries.listEvents('elsewhere-1')).map((e) => [e.source, e.eventId, e.reason]),
    [['webhook', 'evt_in_body', 'initial']],
  );
  assert.equal(job.data.dedupeKey, 'event-id:evt_in_body');
});

test('events that can never apply fail at once with a clear reason and stay failed; the others of their batch apply', async (t) => {
  const { t: scope, redis, dbPath, producer, db } = await setup(t);
  const worker = await startTestWorker(scope, { redisUrl: redis.url, dbPath, autorun: false });

  const bad = {
    unparseable: await queueWebhook(producer, '{"event":"order.updated","data":{'),
    notUtf8: await queueWebhook(producer, Buffer.from([0x7b, 0xff, 0xfe, 0x7d])),
    noOrder: await queueWebhook(
      producer,
      JSON.stringify({ event: 'order.updated', data: { status: 'SUCCESS' } }),
    ),
    noStatus: await queueWebhook(producer, webhookBodyOf({ partner_ref: 'no-status' }, 'e1')),
    invoiceOnlyUnknown: await queueWebhook(
      producer,
      webhookBodyOf({ invoice_number: 'INV-NOBODY', status: 'SUCCESS' }, 'e2'),
    ),
  };
  const good = await queueSnapshot(producer, snapshot('fine-1', 'PENDING'));
  // All six are waiting before the worker starts, so they share its first batch.
  void worker.eventWorker.worker.run();

  await jobIn(producer, jobIdOf(good), 'completed');
  const reasons: Record<string, string> = {};
  for (const [name, jobId] of Object.entries(bad)) {
    const job = await jobIn(producer, jobId, 'failed');
    assert.equal(job.attemptsMade, 1, `${name} failed at its first attempt, with 9 attempts left`);
    reasons[name] = job.failedReason;
  }
  assert.match(reasons.unparseable!, /^UNPARSEABLE_BODY: the body is not JSON/);
  assert.match(reasons.notUtf8!, /^NOT_UTF8: the 4-byte body is not UTF-8/);
  assert.match(reasons.noOrder!, /^NO_ORDER: the body holds no order/);
  assert.match(reasons.noStatus!, /^INVALID_SNAPSHOT: the order snapshot has no status/);
  assert.match(reasons.invoiceOnlyUnknown!, /^INVALID_SNAPSHOT: order INV-NOBODY is unknown locally/);

  assert.deepEqual(await producer.webhookQueue.getJobCounts('failed', 'completed', 'delayed', 'waiting'), {
    failed: 5,
    completed: 1,
    delayed: 0,
    waiting: 0,
  });
  assert.deepEqual(
    db.prepare('SELECT partner_ref, event_id FROM order_events').all(),
    [{ partner_ref: 'fine-1', event_id: good }],
    'nothing of the failed events was written',
  );
});

test('a transient SQLite failure (the write lock held past the busy timeout) is retried with backoff and then applies', async (t) => {
  const { t: scope, redis, dbPath, producer, db, store } = await setup(t);
  const worker = await startTestWorker(scope, { redisUrl: redis.url, dbPath, busyTimeoutMs: 100 });
  const failures: string[] = [];
  worker.eventWorker.worker.on('failed', (_job, error) =>
    failures.push(String((error as { code?: string }).code)),
  );

  db.exec('BEGIN IMMEDIATE'); // another process holding the write lock
  let released = false;
  scope.after(() => {
    if (!released) db.exec('ROLLBACK');
  });
  const eventId = await queueSnapshot(producer, snapshot('busy-1', 'SUCCESS', { serial_number: 'SN-B' }));
  const delayed = await jobIn(producer, jobIdOf(eventId), 'delayed');
  assert.equal(delayed.attemptsMade, 1);
  assert.match(delayed.failedReason, /database is locked/);
  // The worker's 'failed' event may come a moment after Redis shows the job delayed.
  await waitFor(() => failures.length > 0, { message: "the worker's failed event" });
  assert.deepEqual(failures, ['SQLITE_BUSY']);

  db.exec('COMMIT');
  released = true;
  const job = await jobIn(producer, jobIdOf(eventId), 'completed');
  assert.equal(job.attemptsMade, 2, 'applied at the second attempt, after the backoff');
  assert.equal((await store.queries.getOrder('busy-1'))?.serialNumber, 'SN-B');
  assert.equal((await store.queries.listEvents('busy-1')).length, 1);
});

test('a wrong event worker option throws at construction, before anything connects', async (t) => {
  const { store } = await tempStore(t);
  assert.throws(
    () => createEventWorker({ writer: store.writer, concurrency: 0 }),
    /concurrency must be a whole number ≥ 1, got 0/,
  );
  assert.throws(
    () => createEventWorker({ writer: store.writer, lockDurationMs: 1.5 }),
    /lockDurationMs must be a whole number ≥ 1/,
  );
  assert.throws(
    () => createEventWorker({ writer: store.writer, maxStalledCount: -1 }),
    /maxStalledCount must be a whole number ≥ 0/,
  );
});
