import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { createWebhookProducer, QueueUnavailableError } from '../../src/queue/webhook-producer.js';
import { privateRedis } from '../helpers/redis.js';

const delivery = (eventId: string) => ({
  rawBody: Buffer.from(`{"event_id":"${eventId}"}`),
  headerEventId: eventId,
  timestamp: 1,
});

describe('webhook producer', () => {
  test('adds requested in one turn each resolve with their own job, and all are stored', async (t) => {
    const server = await privateRedis(t);
    const producer = createWebhookProducer({ redisUrl: server.url, prefix: 'one-turn' });
    t.after(() => producer.close());
    await producer.ping();

    const adds = ['evt_1', 'evt_2', 'evt_3', 'evt_4'].map((id) => producer.enqueueWebhook(delivery(id)));
    const results = await Promise.all(adds);

    assert.deepEqual(
      results.map((r) => [r.jobId, r.duplicate]),
      [
        ['ev-evt_1', false],
        ['ev-evt_2', false],
        ['ev-evt_3', false],
        ['ev-evt_4', false],
      ],
    );
    assert.equal(await producer.webhookQueue.count(), 4);
  });

  test('adds of one event in one turn: the first is new, every later one a duplicate, and one job is stored', async (t) => {
    const server = await privateRedis(t);
    const producer = createWebhookProducer({ redisUrl: server.url, prefix: 'same-turn' });
    t.after(() => producer.close());
    await producer.ping();

    const ids = ['evt_1', 'evt_2', 'evt_1', 'evt_3', 'evt_2', 'evt_1'];
    const results = await Promise.all(ids.map((id) => producer.enqueueWebhook(delivery(id))));

    assert.deepEqual(
      results.map((r) => [r.jobId, r.duplicate]),
      [
        ['ev-evt_1', false],
        ['ev-evt_2', false],
        ['ev-evt_1', true],
        ['ev-evt_3', false],
        ['ev-evt_2', true],
        ['ev-evt_1', true],
      ],
    );
    assert.equal(await producer.webhookQueue.count(), 3, 'one job per event');
    for (const { jobId } of results) assert.ok(await producer.webhookQueue.getJob(jobId), jobId);
  });

  test('when Redis refuses the adds, every one rejects with QueueUnavailableError and none is stored', async (t) => {
    const server = await privateRedis(t);
    const producer = createWebhookProducer({ redisUrl: server.url, prefix: 'refused' });
    t.after(() => producer.close());
    await producer.ping();
    const admin = new Redis(server.url);
    admin.on('error', () => {});
    t.after(() => admin.disconnect());
    // Redis over its memory limit (noeviction) refuses every command that may write.
    await admin.config('SET', 'maxmemory', '1');

    const outcomes = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => producer.enqueueWebhook(delivery(`evt_${i}`))),
    );

    for (const outcome of outcomes) {
      assert.equal(outcome.status, 'rejected');
      assert.ok(outcome.reason instanceof QueueUnavailableError, String(outcome.reason));
      assert.match(outcome.reason.message, /OOM/);
    }
    await admin.config('SET', 'maxmemory', '0');
    assert.equal(await producer.webhookQueue.count(), 0);
  });
});
