import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { liveOrder, seqOf, startTestNotifier, verifyNotification } from '../helpers/notify.js';
import { ISO_UTC, publicFormBreaches } from '../helpers/public-json.js';
import { privateRedis } from '../helpers/redis.js';
import { openTestStore, scheduleSettings, tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import { cleanupScope } from '../helpers/worker.js';

test('endpoints add prints the secret once; given-up notifications are listed, retried and replayed from the CLI', async (t) => {
  const scope = cleanupScope(t);
  const redis = await privateRedis(scope);
  const dbPath = tempDbPath(scope);
  const env = { REDIS_URL: redis.url, H2H_DB_PATH: dbPath, H2H_NOTIFY_RETRY_S: '0.05,0.05' };
  let up = false;
  const sink = await startWebhookSink(scope, { secrets: [], answer: () => (up ? 200 : 503) });

  const added = await runCli(['endpoints', 'add', sink.url, '--events', 'order.*', '--json'], env);
  assert.equal(added.code, 0, added.stderr);
  const endpoint = JSON.parse(added.stdout) as { id: number; secret: string; state: string };
  assert.match(endpoint.secret, /^whsec_[A-Za-z0-9+/]+=*$/);
  assert.equal(endpoint.state, 'enabled');
  const listed = await runCli(['endpoints', 'list', '--json'], env);
  assert.ok(!listed.stdout.includes(endpoint.secret), 'list never shows a secret');
  const [shown] = JSON.parse(listed.stdout) as Array<{
    id: number;
    created_at: string;
    rotation_until: null;
  }>;
  assert.deepEqual([shown!.id, shown!.rotation_until], [endpoint.id, null]);
  assert.match(shown!.created_at, ISO_UTC);

  const store = await openTestStore(dbPath, scheduleSettings(), { now: Date.now });
  scope.after(() => store.close());
  const start = new Date(Date.now() - 1000).toISOString();
  await startTestNotifier(scope, { store, retryScheduleMs: [50, 50] });
  await liveOrder(store, 'C-1');
  const seqs = (await store.feed.after(0, 1000)).map((e) => e.seq);

  // 503 to all: the first event gives up after three attempts, and the later ones of its order
  // then go, and give up too.
  await waitFor(async () => (await store.deliveries.failed()).length === seqs.length, {
    message: 'every event given up',
  });
  const failed = await runCli(['notifications', 'failed', '--since', start, '--json'], env);
  assert.equal(failed.code, 0, failed.stderr);
  const given = JSON.parse(failed.stdout) as Array<Record<string, unknown>>;
  assert.deepEqual(
    given.map((f) => [f.endpoint_id, f.seq, f.attempt, f.status, f.outcome]),
    seqs.map((seq) => [endpoint.id, seq, 3, 503, 'gave_up']),
  );
  assert.deepEqual(publicFormBreaches(given), []);
  for (const f of given) assert.equal(typeof f.duration_ms, 'number');

  up = true;
  const retried = await runCli(
    ['notifications', 'retry', '--since', start, '--endpoint', String(endpoint.id)],
    env,
  );
  assert.equal(retried.code, 0, retried.stderr);
  assert.match(retried.stdout, /requeued 4 failed notifications/);
  const firstRound = await sink.waitForDeliveries((d) => d.answer === 200, seqs.length);
  assert.deepEqual(firstRound.map(seqOf).sort(), [...seqs].sort());
  await waitFor(async () => (await store.deliveries.failed()).length === 0, {
    message: 'the retries recorded as delivered',
  });
  assert.equal((await runCli(['notifications', 'failed', '--json'], env)).stdout.trim(), '[]');

  // By its old name, `replay`, which scripts written before `resend` still use.
  const replayed = await runCli(['notifications', 'replay', '--since', start], env);
  assert.equal(replayed.code, 0, replayed.stderr);
  assert.match(replayed.stdout, /queued 4 notifications of 4 events/);
  const all = await sink.waitForDeliveries((d) => d.answer === 200, seqs.length * 2);
  for (const delivery of all) verifyNotification(endpoint.secret, delivery);
  assert.deepEqual(all.map(seqOf).sort(), [...seqs, ...seqs].sort(), 'a replay carries the same webhook-id');
});
