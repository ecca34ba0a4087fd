import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { crashTestWorkerEnv, liveOrder, seqOf, verifyNotification } from '../helpers/notify.js';
import { privateRedis } from '../helpers/redis.js';
import { openTestStore, scheduleSettings, tempDbPath } from '../helpers/store.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import { cleanupScope, spawnWorker } from '../helpers/worker.js';

test('the worker killed between commit and delivery loses nothing: every event arrives, in sequence per order', async (t) => {
  const scope = cleanupScope(t);
  const redis = await privateRedis(scope);
  const dbPath = tempDbPath(scope);
  const store = await openTestStore(dbPath, scheduleSettings(), { now: Date.now });
  scope.after(() => store.close());
  let up = false;
  const sink = await startWebhookSink(scope, { secrets: [], answer: () => (up ? 200 : 'hang') });
  const secret = generateEndpointSecret();
  await store.endpoints.add({ url: sink.url, events: ['order.*'], secret });
  const env = crashTestWorkerEnv(redis.url, dbPath);

  const { child } = await spawnWorker(scope, env);
  await liveOrder(store, 'K-1');
  // A delivery is in flight (the shop has not answered) when the worker dies.
  await sink.waitForDeliveries(() => true, 1);
  const killed = once(child, 'exit');
  child.kill('SIGKILL');
  assert.equal((await killed)[1], 'SIGKILL');
  // Committed while no worker runs: only the feed knows about these.
  await liveOrder(store, 'K-2');

  up = true;
  await spawnWorker(scope, env);
  const seqs = (await store.feed.after(0, 1000)).map((e) => e.seq);
  const delivered = await sink.waitForDeliveries((d) => d.answer === 200, seqs.length, { timeoutMs: 20_000 });
  assert.deepEqual(
    [...new Set(delivered.map(seqOf))].sort((a, b) => a - b),
    seqs,
  );
  for (const ref of ['K-1', 'K-2']) {
    const versions = delivered
      .map((d) => verifyNotification(secret, d))
      .filter((body) => body.data.partner_ref === ref)
      .map((body) => body.data.version);
    assert.deepEqual([...new Set(versions)], [1, 2, 3, 4], `${ref} in sequence`);
  }
});
