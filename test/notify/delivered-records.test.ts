import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { NOTIFY_QUEUE, notifyJobId } from '../../src/notify/notify-queue.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { DEFAULT_QUEUE_PREFIX } from '../../src/queue/webhook-queue.js';
import { crashTestWorkerEnv, liveOrder, notifySetup, seqOf } from '../helpers/notify.js';
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
  const jobIds = [1, 2, 3, 4].map((seq) => notifyJobId(endpoint.id, seq));
  await waitFor(
    async () => {
      const noted = await connection.hkeys(notes);
      const states = await Promise.all(
        jobIds.map((id) => connection.zscore(`${DEFAULT_QUEUE_PREFIX}:${NOTIFY_QUEUE}:completed`, id)),
      );
      return jobIds.every((id) => noted.includes(id)) && states.every((score) => score !== null);
    },
    { message: 'the four jobs completed, their 2xx noted, no record written' },
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
