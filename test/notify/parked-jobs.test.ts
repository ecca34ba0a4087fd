import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { Worker } from 'bullmq';
import { dispatchNotifications } from '../../src/notify/dispatcher.js';
import { NOTIFY_QUEUE, type NotifyJobData, notifyJobId } from '../../src/notify/notify-queue.js';
import { liveOrder, notifyQueue, notifySetup, seqOf, startTestNotifier } from '../helpers/notify.js';
import { waitFor } from '../helpers/wait.js';
import type { cleanupScope } from '../helpers/worker.js';

/** A queue and a raw BullMQ worker of the notification queue under `prefix`: another process's worker. */
function otherProcess(scope: ReturnType<typeof cleanupScope>, redisUrl: string, prefix: string) {
  const { queue, connection } = notifyQueue(scope, redisUrl, prefix);
  const worker = (processor: () => Promise<never>) => {
    const w = new Worker<NotifyJobData>(NOTIFY_QUEUE, processor, {
      connection,
      prefix,
      lockDuration: 300,
      // It leaves looking for stalled jobs to the notifier (a check sets a key that holds off the next).
      skipStalledCheck: true,
    });
    scope.after(() => w.close(true));
    return w;
  };
  return { queue, worker };
}

test('a notification job that stalls past its limit (its worker died mid-delivery) is recorded gave_up, and the next event of its order goes', async (t) => {
  const { scope, redis, store, sink, endpoint } = await notifySetup(t);
  const prefix = `t-${randomUUID()}`;
  const other = otherProcess(scope, redis.url, prefix);

  await liveOrder(store, 'S-1'); // seq 1-4
  await dispatchNotifications(store, other.queue, { retries: 3 });
  // A worker takes the first event's job and dies without a word: its lock runs out.
  const dying = other.worker(() => new Promise<never>(() => {}));
  await waitFor(async () => (await other.queue.getJob(notifyJobId(endpoint.id, 1)))?.isActive(), {
    message: 'the first job taken',
  });
  await dying.close(true);

  // No stall allowed: the notifier's stalled check fails the job for good, without delivering.
  await startTestNotifier(scope, { store, redisUrl: redis.url, prefix, maxStalledCount: 0 });
  const parked = await waitFor(
    async () => (await store.deliveries.failed({ endpointId: endpoint.id })).find((d) => d.seq === 1),
    { message: 'the stalled job recorded gave_up' },
  );
  assert.equal(parked.outcome, 'gave_up');
  assert.equal(parked.status, null);
  assert.match(parked.error ?? '', /stalled more than allowable limit/);
  assert.equal(await (await other.queue.getJob(notifyJobId(endpoint.id, 1)))?.isFailed(), true);

  const later = await sink.waitForDeliveries(() => true, 3);
  assert.deepEqual(later.map(seqOf), [2, 3, 4], 'the rest of the order, in sequence');
  assert.equal(sink.deliveries.filter((d) => seqOf(d) === 1).length, 0);
});

test('a notification job that failed for good in a process that died before recording it is recorded gave_up at the next start', async (t) => {
  const { scope, redis, store, sink, endpoint } = await notifySetup(t);
  const prefix = `t-${randomUUID()}`;
  const other = otherProcess(scope, redis.url, prefix);

  await liveOrder(store, 'P-1'); // seq 1-4
  // One attempt each, and an error before the delivery records anything: all four fail for good.
  await dispatchNotifications(store, other.queue, { retries: 0 });
  const broken = other.worker(async () => {
    throw new Error('the store is not reachable');
  });
  await waitFor(async () => (await other.queue.getJobCounts('failed')).failed === 4, {
    message: 'four jobs failed',
  });
  await broken.close();
  assert.equal(
    (await store.deliveries.history({ endpointId: endpoint.id })).length,
    0,
    'nothing recorded yet',
  );

  await startTestNotifier(scope, { store, redisUrl: redis.url, prefix });
  const failed = await store.deliveries.failed({ endpointId: endpoint.id });
  assert.deepEqual(
    failed.map((d) => [d.seq, d.outcome, d.attempt]),
    [1, 2, 3, 4].map((seq) => [seq, 'gave_up', 1]),
    'recorded by the start-up sweep before the notifier is ready',
  );
  assert.match(failed[0]!.error ?? '', /the store is not reachable/);
  assert.equal(sink.deliveries.length, 0);
});
