import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { FIXTURE_EXEC_ARGV } from '../helpers/fixture-process.js';
import { privateRedis } from '../helpers/redis.js';
import { nextMessage, otherConnection, snapshot, tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import {
  appliedEvents,
  cleanupScope,
  queueSnapshot,
  startTestWorker,
  testProducer,
  webhookJobCounts,
} from '../helpers/worker.js';

const HOLDER = fileURLToPath(new URL('../fixtures/lock-holder-process.ts', import.meta.url));
const LOCK_DURATION_MS = 1_000;

test('a store locked by another process for longer than the job lock duration loses, parks and stalls nothing: the worker waits without blocking its event loop', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  (await otherConnection(dbPath)).close();
  const producer = await testProducer(t, redis.url);
  const { eventWorker, db } = await startTestWorker(t, {
    redisUrl: redis.url,
    dbPath,
    lockDurationMs: LOCK_DURATION_MS,
    stalledIntervalMs: 500,
    maxStalledCount: 1,
    storeLockWaitMs: 20_000,
  });
  const stalled: string[] = [];
  const renewalFailures: string[] = [];
  eventWorker.worker.on('lockRenewalFailed', (jobIds) => renewalFailures.push(...jobIds));
  const errors: Error[] = [];
  eventWorker.worker.on('stalled', (jobId) => stalled.push(jobId));
  eventWorker.worker.on('error', (error) => errors.push(error));

  // Another process takes the store's write lock and keeps it for the next message.
  const holder = fork(HOLDER, [dbPath], { execArgv: FIXTURE_EXEC_ARGV, stdio: 'inherit' });
  t.after(() => holder.kill());
  assert.equal(await nextMessage(holder), 'locked');

  const refs = Array.from({ length: 20 }, (_, i) => `locked-${i}`);
  for (const ref of refs)
    await queueSnapshot(producer, snapshot(ref, 'SUCCESS', { serial_number: `SN-${ref}` }));
  await waitFor(async () => (await webhookJobCounts(producer)).active === refs.length, {
    message: 'every job taken by the worker, waiting for the lock',
  });

  // Held well past the lock duration: the worker must keep renewing its job locks meanwhile,
  // which it can only do while its event loop runs. Four renewal rounds of all 20 jobs (one
  // every half lock duration) span more than a whole lock duration.
  const renewedRounds: number[] = [];
  eventWorker.worker.on('locksRenewed', ({ count }) => renewedRounds.push(count));
  await waitFor(() => renewedRounds.filter((count) => count === refs.length).length >= 4, {
    message: 'four rounds of lock renewals while the store was held',
  });
  assert.equal(appliedEvents(db), 0, 'nothing could be written while the store was held');
  holder.send('release');
  assert.equal(await nextMessage(holder), 'released');

  await waitFor(async () => (await webhookJobCounts(producer)).completed === refs.length, {
    message: 'every event applied once the store was free',
  });
  const counts = await webhookJobCounts(producer);
  assert.deepEqual([counts.failed, counts.waiting, counts.active], [0, 0, 0], 'nothing parked or left');
  assert.equal(appliedEvents(db), refs.length, 'each event applied once');
  assert.deepEqual(stalled, [], 'no job was reported stalled');
  assert.deepEqual(renewalFailures, [], 'no lock renewal failed');
  assert.deepEqual(
    errors.map((e) => e.message),
    [],
    'no worker error (no "Missing lock")',
  );
});
