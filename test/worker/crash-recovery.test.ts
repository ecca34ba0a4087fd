import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import type { Database } from 'better-sqlite3';
import type { WebhookProducer } from '../../src/queue/webhook-producer.js';
import { storedEventId } from '../../src/queue/webhook-queue.js';
import { freezableProxy } from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { openTestStore, otherConnection, snapshot, tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import {
  appliedEvents,
  cleanupScope,
  logLines,
  queueBacklog,
  queueSettled,
  queueWebhook,
  spawnWorker,
  startTestWorker,
  testProducer,
  webhookBodyOf,
  webhookJobCounts,
} from '../helpers/worker.js';

const ORDERS = 2_500;
/** Short locks so that the dead worker's jobs are taken over in about a second. */
const LOCKS = { lockDurationMs: 1_000, stalledIntervalMs: 250 };

/** Two events per order, PROCESSING then SUCCESS with a serial. */
async function queueTimelines(producer: WebhookProducer): Promise<void> {
  for (let start = 0; start < ORDERS; start += 250) {
    await Promise.all(
      Array.from({ length: Math.min(250, ORDERS - start) }, async (_, i) => {
        const ref = `crash-${start + i}`;
        for (const [step, order] of [
          snapshot(ref, 'PROCESSING'),
          snapshot(ref, 'SUCCESS', { serial_number: `SN-${ref}` }),
        ].entries()) {
          const eventId = `evt_${ref}_${step}`;
          await queueWebhook(producer, webhookBodyOf(order, eventId), eventId);
        }
      }),
    );
  }
}

test('a worker killed with SIGKILL mid-batch loses nothing: another takes over its stalled jobs, and each event applies once in effect', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  const producer = await testProducer(t, redis.url);
  await queueTimelines(producer);
  const events = ORDERS * 2;
  const reader = await otherConnection(dbPath);
  t.after(() => reader.close());

  const { child } = await spawnWorker(t, {
    REDIS_URL: redis.url,
    H2H_DB_PATH: dbPath,
    H2H_WORKER_LOCK_DURATION_MS: String(LOCKS.lockDurationMs),
    H2H_WORKER_STALLED_INTERVAL_MS: String(LOCKS.stalledIntervalMs),
  });
  await waitFor(() => appliedEvents(reader) >= 1_000, { intervalMs: 5, message: '1,000 events applied' });
  const killed = once(child, 'exit');
  child.kill('SIGKILL');
  assert.deepEqual((await killed)[1], 'SIGKILL');

  const atDeath = await webhookJobCounts(producer);
  const appliedAtDeath = appliedEvents(reader);
  assert.ok((atDeath.active ?? 0) > 0, 'it died holding active jobs');
  assert.ok(appliedAtDeath < events, 'it died before the end of the backlog');

  const { eventWorker } = await startTestWorker(t, { redisUrl: redis.url, dbPath, ...LOCKS });
  let stalled = 0;
  eventWorker.worker.on('stalled', () => {
    stalled += 1;
  });
  await waitFor(
    async () => (await queueSettled(producer)) && (await webhookJobCounts(producer)).completed === events,
    { timeoutMs: 30_000, message: `all ${events} jobs completed` },
  );

  const counts = await webhookJobCounts(producer);
  assert.equal(counts.failed, 0);
  assert.ok(stalled > 0, 'the second worker took over stalled jobs');
  assert.equal(stalled, atDeath.active, 'exactly the jobs the dead worker held');
  assert.deepEqual(
    reader.prepare('SELECT COUNT(*) AS rows, COUNT(DISTINCT event_id) AS ids FROM order_events').get(),
    { rows: events, ids: events },
    'one order_events row per event id: nothing lost, nothing applied twice',
  );
  const store = await openTestStore(dbPath);
  t.after(() => store.close());
  for (let n = 0; n < ORDERS; n++) {
    const order = (await store.queries.getOrder(`crash-${n}`))!;
    assert.deepEqual([order.status, order.serialNumber], ['SUCCESS', `SN-crash-${n}`], order.partnerRef);
  }
  const duplicates = (await producer.webhookQueue.getCompleted(0, -1)).filter(
    (job) => job.returnvalue?.duplicate,
  );
  test.diagnostic(
    `killed after ${appliedAtDeath} events with ${atDeath.active} jobs active; ` +
      `${duplicates.length} of them had committed before the kill and applied again as duplicates`,
  );
});

/** Takes the SQLite write lock on `db` (another process), trying every few ms as the store does. */
async function takeWriteLock(db: Database): Promise<void> {
  db.pragma('busy_timeout = 5');
  await waitFor(
    () => {
      try {
        db.exec('BEGIN IMMEDIATE');
        return true;
      } catch (error) {
        if ((error as { code?: string }).code === 'SQLITE_BUSY') return false;
        throw error;
      }
    },
    { intervalMs: 1, message: 'the write lock' },
  );
}

test('a worker cut off from Redis after committing exits within its deadline; another takes over its jobs, which apply again as duplicates and change nothing', {
  timeout: 120_000,
}, async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  const producer = await testProducer(t, redis.url);
  const backlog = 8_000;
  await queueBacklog(producer, backlog, 'frozen');
  const reader = await otherConnection(dbPath);
  t.after(() => reader.close());
  const proxy = await freezableProxy(t, redis);

  const { child, output } = await spawnWorker(t, {
    REDIS_URL: proxy.url,
    H2H_DB_PATH: dbPath,
    H2H_WORKER_LOCK_DURATION_MS: String(LOCKS.lockDurationMs),
    H2H_WORKER_STALLED_INTERVAL_MS: String(LOCKS.stalledIntervalMs),
    H2H_WORKER_SHUTDOWN_TIMEOUT_MS: '1000',
  });
  await waitFor(() => appliedEvents(reader) >= 300, { intervalMs: 5, message: '300 events applied' });

  // Hold the batch the worker is gathering: with the write lock taken here it cannot commit,
  // so once completions stop, every job it has received is in a batch waiting for the lock.
  await takeWriteLock(reader);
  let lastCompleted = -1;
  await waitFor(
    async () => {
      const { completed } = await webhookJobCounts(producer);
      const settled = completed === lastCompleted;
      lastCompleted = completed ?? 0;
      return settled;
    },
    { intervalMs: 100, message: 'completions stopped' },
  );
  // Then Redis freezes (like a Redis stopped with SIGSTOP) and the lock is released: the
  // batch commits to SQLite, but its completions never reach Redis.
  proxy.freeze();
  reader.exec('COMMIT');
  await waitFor(() => appliedEvents(reader) > lastCompleted, { message: 'the held batch committed' });

  // BullMQ's own close would now wait forever for Redis (bullmq#4656); the stop has a deadline.
  // A stop without one would hang here until this test's timeout fails it.
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const [code] = await exited;
  assert.equal(code, 1, output());
  const gaveUp = logLines(output()).find(
    (line) => line.msg === 'event worker did not close in time; leaving its jobs to stall recovery',
  );
  assert.equal(gaveUp?.timeoutMs, 1_000, `it gave up at its H2H_WORKER_SHUTDOWN_TIMEOUT_MS\n${output()}`);
  // Redis is only frozen for the dead worker: what it shows now is final for that worker.
  const takenOver = await producer.webhookQueue.getActive();
  assert.ok(takenOver.length > 0, 'its jobs are left active in Redis');
  const committed = new Set(
    (reader.prepare('SELECT event_id FROM order_events').all() as { event_id: string }[]).map(
      (e) => e.event_id,
    ),
  );
  // The jobs it left whose events it had committed: the batch held by the frozen Redis.
  const committedNotCompleted = takenOver
    .filter((job) => committed.has(storedEventId(job.data)))
    .map((job) => job.id);
  assert.ok(committedNotCompleted.length > 0, 'it committed events whose completions never reached Redis');

  await startTestWorker(t, { redisUrl: redis.url, dbPath, ...LOCKS });
  await waitFor(
    async () => (await queueSettled(producer)) && (await webhookJobCounts(producer)).completed === backlog,
    { timeoutMs: 30_000, message: `all ${backlog} jobs completed` },
  );
  // Counted by job, not by totals: on a loaded machine a worker with these short locks may lose
  // one and run that job again as a duplicate, just as harmlessly.
  const duplicates = (await producer.webhookQueue.getCompleted(0, -1)).filter(
    (job) => job.returnvalue?.duplicate,
  );
  const duplicateIds = new Set(duplicates.map((job) => job.id));
  assert.deepEqual(
    committedNotCompleted.filter((id) => !duplicateIds.has(id)),
    [],
    `every event the dead worker committed without completing its job applied again as a duplicate (${committedNotCompleted.length} of ${takenOver.length} taken over)`,
  );
  assert.deepEqual(
    reader.prepare('SELECT COUNT(*) AS rows, COUNT(DISTINCT event_id) AS ids FROM order_events').get(),
    { rows: backlog, ids: backlog },
  );
  const store = await openTestStore(dbPath);
  t.after(() => store.close());
  for (const job of duplicates) {
    const ref = job.returnvalue.partnerRef;
    assert.equal((await store.queries.listEvents(ref)).length, 1, `${ref} recorded once`);
    assert.equal((await store.queries.getOrder(ref))?.serialNumber, `SN-${ref}`);
  }
});
