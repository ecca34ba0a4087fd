import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Queue } from 'bullmq';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { moveOldNotificationQueue } from '../../src/queue/old-notify-queue.js';
import { liveOrder, notifySetup, seqOf, startTestNotifier, verifyNotification } from '../helpers/notify.js';
import { privateRedis } from '../helpers/redis.js';
import { openTestStore, scheduleSettings, tempStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import { cleanupScope } from '../helpers/worker.js';

test('two notifiers on one store (two processes) deliver every event exactly once, each order in sequence', async (t) => {
  const { scope, store, dbPath, sink, secret } = await notifySetup(t);
  const other = await openTestStore(dbPath, scheduleSettings(), { now: Date.now });
  scope.after(() => other.close());
  await startTestNotifier(scope, { store });
  await startTestNotifier(scope, { store: other });
  for (const ref of ['T-1', 'T-2', 'T-3', 'T-4', 'T-5']) await liveOrder(store, ref);
  const seqs = (await store.feed.after(0, 1000)).map((e) => e.seq);
  await sink.waitForDeliveries(() => true, seqs.length);
  await waitFor(async () => (await store.deliveries.history({ limit: 100 })).length >= seqs.length, {
    message: 'every delivery recorded',
  });
  assert.deepEqual(
    sink.deliveries.map(seqOf).sort((a, b) => a - b),
    seqs,
    'each event once',
  );
  const byOrder = new Map<string, number[]>();
  for (const body of sink.deliveries.map((d) => verifyNotification(secret, d))) {
    byOrder.set(body.data.partner_ref, [...(byOrder.get(body.data.partner_ref) ?? []), body.data.version]);
  }
  for (const [ref, versions] of byOrder) assert.deepEqual(versions, [1, 2, 3, 4], `${ref} in sequence`);
});

test('an endpoint that does not answer holds up only its own notifications: another endpoint gets every event meanwhile', async (t) => {
  const scope = cleanupScope(t);
  const { store } = await tempStore(scope, { now: Date.now });
  const slow = await startWebhookSink(scope, { secrets: [], answer: () => 'hang' });
  const fast = await startWebhookSink(scope, { secrets: [] });
  await store.endpoints.add({ url: slow.url, events: ['order.*'], secret: generateEndpointSecret() });
  await store.endpoints.add({ url: fast.url, events: ['order.*'], secret: generateEndpointSecret() });
  // Two deliveries at once, a minute's time-out: the slow shop's first events hold them long.
  await startTestNotifier(scope, { store, concurrency: 2, timeoutMs: 60_000 });
  for (const ref of ['S-1', 'S-2', 'S-3']) await liveOrder(store, ref);
  await slow.waitForDeliveries(() => true, 1);
  // The slow endpoint's orders each wait for their first event; the fast one gets all twelve.
  await fast.waitForDeliveries(() => true, 12);
  assert.ok(
    slow.deliveries.length <= 2,
    `the slow endpoint holds at most the two slots (${slow.deliveries.length})`,
  );
});

test('upgrading: the notifications the queue before the outbox still held move into the outbox at their attempt and due time, and the queue goes', async (t) => {
  const scope = cleanupScope(t);
  const redis = await privateRedis(scope);
  const { store } = await tempStore(scope);
  const endpoint = await store.endpoints.add({
    url: 'http://127.0.0.1:9/hook',
    events: ['order.*'],
    secret: generateEndpointSecret(),
  });
  await liveOrder(store, 'U-1'); // seq 1-4
  await liveOrder(store, 'U-2'); // seq 5-8
  // The old dispatcher's cursor: past the events it had made jobs of.
  await store.db.run('UPDATE notify_endpoints SET cursor = 8 WHERE id = @id', { id: endpoint.id });
  const old = new Queue('h2h-notifications', { connection: { url: redis.url } });
  scope.after(() => old.close());
  await old.add('order.submitted U-1', { endpointId: endpoint.id, seq: 1 });
  await old.add('order.updated U-1', { endpointId: endpoint.id, seq: 2 });
  // A retry waiting 30 s, whose first attempt the old dispatcher had made itself.
  await old.add(
    'order.submitted U-2',
    { endpointId: endpoint.id, seq: 5, attemptsBefore: 1 },
    { delay: 30_000 },
  );

  const moved = await moveOldNotificationQueue({ store, redisUrl: redis.url });
  assert.equal(moved, 3);
  const rows = await store.db.all<{ seq: number; attempt: number; next_at: number | null }>(
    'SELECT seq, attempt, next_at FROM notify_outbox ORDER BY seq',
  );
  assert.deepEqual(
    rows.map((r) => [r.seq, r.attempt]),
    [
      [1, 1],
      [2, 1],
      [5, 2],
    ],
  );
  assert.equal(rows[1]!.next_at, null, "U-1's second event waits for its first");
  assert.ok(rows[2]!.next_at! > rows[0]!.next_at! + 29_000, 'the retry keeps its wait');
  assert.deepEqual(
    await old.getJobCounts('waiting', 'delayed'),
    { waiting: 0, delayed: 0 },
    'the queue is gone',
  );
  assert.equal(await moveOldNotificationQueue({ store, redisUrl: redis.url }), 0, 'once');
});
