import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { openDatabase } from '../../src/store/database.js';
import { privateRedis } from '../helpers/redis.js';
import { tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import {
  appliedEvents,
  cleanupScope,
  queueBacklog,
  spawnWorker,
  testProducer,
  webhookJobCounts,
} from './worker-harness.js';

test('on SIGTERM h2h-sync worker stops taking jobs, commits and completes its active ones, and exits 0', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  const producer = await testProducer(t, redis.url);
  const backlog = 8_000;
  await queueBacklog(producer, backlog, 'stop');
  const reader = openDatabase({ path: dbPath });
  t.after(() => reader.close());

  const { child, output } = await spawnWorker(t, { REDIS_URL: redis.url, H2H_DB_PATH: dbPath });
  await waitFor(() => appliedEvents(reader) >= 300, { intervalMs: 5, message: '300 events applied' });
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const [code, signal] = await exited;
  assert.deepEqual({ code, signal }, { code: 0, signal: null }, output());

  const counts = await webhookJobCounts(producer);
  const applied = appliedEvents(reader);
  assert.equal(counts.active, 0, 'no job left active for stall recovery');
  assert.equal(counts.failed, 0);
  assert.equal(
    counts.completed,
    applied,
    'every committed event completed, and every completed one committed',
  );
  assert.ok(applied < backlog, `stopped before the end of the backlog (${applied} of ${backlog})`);
  assert.equal(counts.waiting, backlog - applied, 'the rest is waiting, untouched');
  assert.match(output(), /"msg":"worker stopped"/);
});
