import assert from 'node:assert/strict';
import { describe, type TestContext, test } from 'node:test';
import { type JobsOptions, Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { startRedisServer } from '../../src/dev/redis-server.js';
import { createBatchedJobAdder } from '../../src/queue/job-batch.js';
import { createWebhookProducer, QueueUnavailableError } from '../../src/queue/webhook-producer.js';
import { WEBHOOK_JOB_NAME, WEBHOOK_JOB_OPTIONS, type WebhookJobData } from '../../src/queue/webhook-queue.js';
import { privateRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const delivery = (eventId: string) => ({
  rawBody: Buffer.from(`{"event_id":"${eventId}"}`),
  eventId,
  timestamp: 1,
});

const data = (n: number): WebhookJobData => ({
  dedupeKey: `event-id:evt_${n}`,
  eventId: `evt_${n}`,
  rawBody: `{"event_id":"evt_${n}","data":{"partner_ref":"caf\\u00e9 \\"${n}\\""}}`,
  rawBodyEncoding: 'utf8',
  receivedAt: 1_700_000_000_000 + n,
  headers: { timestamp: 1_700_000_000, eventType: 'order.updated' },
});

/** A queue on its own connection, as the producer has it, on a private Redis; all closed after the test. */
async function webhookQueue(
  t: TestContext,
  prefix = 'batch',
  defaultJobOptions: JobsOptions = WEBHOOK_JOB_OPTIONS,
) {
  const server = await startRedisServer();
  const redis = new Redis(server.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  const queue = new Queue<WebhookJobData>('h2h-webhooks', { connection: redis, prefix, defaultJobOptions });
  t.after(async () => {
    await queue.close();
    redis.disconnect();
    await server.stop();
  });
  await queue.waitUntilReady();
  return { server, redis, queue };
}

/**
 * Every key of `prefix`'s webhook queue with its type, content and time to live, normalised:
 * job timestamps and stream entry ids vary.
 */
async function queueKeys(redis: Redis, prefix: string) {
  const base = `${prefix}:h2h-webhooks:`;
  const keys = (await redis.keys(`${base}*`)).sort();
  const dump: Record<string, unknown> = {};
  for (const key of keys) {
    const name = key.slice(base.length);
    const type = await redis.type(key);
    const ttl = await redis.pttl(key);
    if (ttl !== -1) dump[`${name} (ttl)`] = ttl > 0 ? 'expires' : ttl;
    if (type === 'hash') {
      const { timestamp, opts, ...fields } = await redis.hgetall(key);
      if (timestamp !== undefined) {
        assert.ok(
          Math.abs(Number(timestamp) - Date.now()) < 60_000,
          `${name}: timestamp is the time of the add`,
        );
      }
      dump[name] = { ...fields, ...(opts === undefined ? {} : { opts: JSON.parse(opts) }) };
    } else if (type === 'list') dump[name] = await redis.lrange(key, 0, -1);
    else if (type === 'zset') dump[name] = await redis.zrange(key, 0, -1, 'WITHSCORES');
    else if (type === 'stream') dump[name] = (await redis.xrange(key, '-', '+')).map(([, fields]) => fields);
    else if (type === 'set') dump[name] = (await redis.smembers(key)).sort();
    else if (type === 'string') dump[name] = await redis.get(key);
    else dump[name] = type;
  }
  return dump;
}

describe('batched job adds (job-batch.ts)', () => {
  /** A step of {@link sameAsQueueAdd}: something done to both queues, then the same adds. */
  interface Step {
    prepare?: (queue: Queue<WebhookJobData>, redis: Redis) => Promise<unknown>;
    jobIds: string[];
  }

  /**
   * Runs the steps on two queues, with queue.add one job after another on the first and one
   * batch per step on the second, and compares every key of both after each step.
   */
  async function sameAsQueueAdd(t: TestContext, steps: Step[], jobOptions?: JobsOptions) {
    const viaAdd = await webhookQueue(t, 'via-add', jobOptions);
    const viaBatch = await webhookQueue(t, 'via-batch', jobOptions);
    const addBatch = createBatchedJobAdder(viaBatch.queue, viaBatch.redis, WEBHOOK_JOB_NAME);
    for (const [n, { prepare, jobIds }] of steps.entries()) {
      await prepare?.(viaAdd.queue, viaAdd.redis);
      await prepare?.(viaBatch.queue, viaBatch.redis);
      for (const [i, jobId] of jobIds.entries()) {
        await viaAdd.queue.add(WEBHOOK_JOB_NAME, data(10 * n + i), { jobId });
      }
      const results = await addBatch(jobIds.map((jobId, i) => ({ jobId, data: data(10 * n + i) })));
      assert.ok(results.every((r) => r.ok));

      const [expected, actual] = await Promise.all([
        queueKeys(viaAdd.redis, 'via-add'),
        queueKeys(viaBatch.redis, 'via-batch'),
      ]);
      assert.deepEqual(actual, expected, `after step ${n + 1}`);
    }
    return queueKeys(viaBatch.redis, 'via-batch');
  }

  test('every key a batch writes is what queue.add writes: new jobs, duplicates, a paused queue', async (t) => {
    const keys = await sameAsQueueAdd(t, [
      { jobIds: ['ev-a', 'ev-b', 'ev-a', 'ev-c'] },
      { jobIds: ['ev-c', 'ev-d'] },
      { prepare: (queue) => queue.pause(), jobIds: ['ev-e', 'ev-b'] },
    ]);
    assert.ok(Object.keys(keys).includes('ev-e'));
  });

  test('and so for a lifo queue, a queue at its global concurrency, and a meta without maxLenEvents', async (t) => {
    const keys = await sameAsQueueAdd(
      t,
      [
        {
          prepare: (queue, redis) => redis.hdel(queue.toKey('meta'), 'opts.maxLenEvents'),
          jobIds: ['ev-a', 'ev-b', 'ev-a'],
        },
        {
          // One job active and a concurrency of 1: the queue is maxed, so no marker is added.
          prepare: async (queue, redis) => {
            await queue.setGlobalConcurrency(1);
            await redis.lpush(queue.toKey('active'), 'ev-busy');
            await redis.del(queue.toKey('marker'));
          },
          jobIds: ['ev-c', 'ev-d'],
        },
        {
          prepare: (queue, redis) =>
            redis.multi().lrem(queue.toKey('active'), 0, 'ev-busy').del(queue.toKey('marker')).exec(),
          jobIds: ['ev-e'],
        },
      ],
      { ...WEBHOOK_JOB_OPTIONS, lifo: true },
    );
    assert.deepEqual(keys.wait, ['ev-a', 'ev-b', 'ev-c', 'ev-d', 'ev-e'], 'lifo: pushed at the tail');
    assert.ok(keys.marker, 'a marker once the queue is no longer maxed');
  });

  test('a batch of 9,000 jobs is stored and queued whole', async (t) => {
    const { redis, queue } = await webhookQueue(t);
    const addBatch = createBatchedJobAdder(queue, redis, WEBHOOK_JOB_NAME);
    const jobIds = Array.from({ length: 9_000 }, (_, i) => `ev-${i}`);

    const results = await addBatch(jobIds.map((jobId, i) => ({ jobId, data: data(i) })));

    assert.equal(results.filter((r) => r.ok && !r.existed).length, 9_000);
    assert.deepEqual(await redis.lrange(queue.toKey('wait'), 0, -1), jobIds.toReversed());
    assert.equal(await redis.zcard(queue.toKey('marker')), 1);
    assert.equal((await queue.getJob('ev-8999'))?.data.eventId, 'evt_8999');
  });

  test('a job added in a batch is stored exactly as queue.add stores it, and a worker processes it', async (t) => {
    const { server, redis, queue } = await webhookQueue(t);
    const addBatch = createBatchedJobAdder(queue, redis, WEBHOOK_JOB_NAME);

    await queue.add(WEBHOOK_JOB_NAME, data(1), { jobId: 'ev-one' });
    const [result] = await addBatch([{ jobId: 'ev-two', data: data(1) }]);

    assert.deepEqual(result, { ok: true, jobId: 'ev-two', existed: false });
    const viaAdd = await redis.hgetall(queue.toKey('ev-one'));
    const viaBatch = await redis.hgetall(queue.toKey('ev-two'));
    const { timestamp: t1, opts: o1, ...rest1 } = viaAdd;
    const { timestamp: t2, opts: o2, ...rest2 } = viaBatch;
    assert.deepEqual(rest2, rest1, 'name, data, delay, priority');
    assert.deepEqual(JSON.parse(o2!), { ...JSON.parse(o1!), jobId: 'ev-two' });
    assert.ok(Math.abs(Number(t2) - Number(t1)) < 5_000, 'timestamp is the time of the add');
    assert.deepEqual(await redis.lrange(queue.toKey('wait'), 0, -1), ['ev-two', 'ev-one']);
    const events = await redis.xrange(queue.toKey('events'), '-', '+');
    const eventsOf = (jobId: string) =>
      events.filter(([, fields]) => fields[3] === jobId).map(([, fields]) => fields[1]);
    assert.deepEqual(eventsOf('ev-two'), eventsOf('ev-one'));

    const job = await queue.getJob('ev-two');
    assert.deepEqual(job?.data, data(1));
    assert.equal(job?.opts.attempts, 10);
    assert.deepEqual(job?.opts.removeOnComplete, WEBHOOK_JOB_OPTIONS.removeOnComplete);

    const processed: string[] = [];
    const worker = new Worker<WebhookJobData>(
      'h2h-webhooks',
      async (j) => {
        processed.push(`${j.id}:${j.data.eventId}`);
      },
      { connection: { url: server.url, maxRetriesPerRequest: null }, prefix: 'batch' },
    );
    try {
      await waitFor(() => processed.length === 2, { message: 'both jobs processed' });
    } finally {
      await worker.close();
    }
    assert.deepEqual(processed.sort(), ['ev-one:evt_1', 'ev-two:evt_1']);
  });

  test('a duplicate, already stored or earlier in the same batch, adds nothing and is answered existed', async (t) => {
    const { redis, queue } = await webhookQueue(t);
    const addBatch = createBatchedJobAdder(queue, redis, WEBHOOK_JOB_NAME);
    await addBatch([{ jobId: 'ev-a', data: data(1) }]);

    const results = await addBatch([
      { jobId: 'ev-a', data: data(2) },
      { jobId: 'ev-b', data: data(3) },
      { jobId: 'ev-b', data: data(4) },
      { jobId: 'ev-c', data: data(5) },
    ]);

    assert.deepEqual(
      results.map((r) => r.ok && [r.jobId, r.existed]),
      [
        ['ev-a', true],
        ['ev-b', false],
        ['ev-b', true],
        ['ev-c', false],
      ],
    );
    assert.equal(await queue.count(), 3);
    assert.equal((await queue.getJob('ev-a'))?.data.eventId, 'evt_1', 'the first add wins');
    assert.equal((await queue.getJob('ev-b'))?.data.eventId, 'evt_3');
  });

  test('job options the batch script does not mirror are refused when the adder is made', async (t) => {
    const { redis } = await webhookQueue(t);
    const refused: [JobsOptions, RegExp][] = [
      [{ priority: 1 }, /addStandardJob only; the queue's job options need addPrioritizedJob/],
      [{ delay: 1_000 }, /addStandardJob only; the queue's job options need addDelayedJob/],
      [{ sizeLimit: 10_000 }, /do not support sizeLimit or telemetry/],
    ];
    for (const [options, message] of refused) {
      const queue = new Queue<WebhookJobData>('other', { connection: redis, defaultJobOptions: options });
      t.after(() => queue.close());
      assert.throws(() => createBatchedJobAdder(queue, redis, WEBHOOK_JOB_NAME), message);
    }
  });

  test('an id BullMQ refuses fails that job alone; the rest of the batch is stored', async (t) => {
    const { redis, queue } = await webhookQueue(t);
    const addBatch = createBatchedJobAdder(queue, redis, WEBHOOK_JOB_NAME);

    const results = await addBatch([
      { jobId: '42', data: data(1) },
      { jobId: 'ev-ok', data: data(2) },
      { jobId: 'a:b', data: data(3) },
    ]);

    assert.deepEqual(
      results.map((r) => r.ok),
      [false, true, false],
    );
    assert.match(String(!results[0]!.ok && results[0]!.error.message), /integer/);
    assert.equal(await queue.count(), 1);
  });
});

describe('webhook producer batching', () => {
  test('adds requested in one turn go to Redis as one command; each resolves with its own job', async (t) => {
    const server = await privateRedis(t);
    const producer = createWebhookProducer({ redisUrl: server.url, prefix: 'one-turn' });
    t.after(() => producer.close());
    await producer.ping();

    const ids = ['evt_1', 'evt_2', 'evt_1', 'evt_3', 'evt_2', 'evt_1'];
    const results = await Promise.all(ids.map((id) => producer.enqueueWebhook(delivery(id))));

    assert.deepEqual(producer.batchStats(), { batches: 1, jobs: 6 });
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

  test('a turn with more adds than maxBatchSize is split into several commands', async (t) => {
    const server = await privateRedis(t);
    const producer = createWebhookProducer({ redisUrl: server.url, prefix: 'split', maxBatchSize: 4 });
    t.after(() => producer.close());
    await producer.ping();

    await Promise.all(Array.from({ length: 10 }, (_, i) => producer.enqueueWebhook(delivery(`evt_${i}`))));

    assert.deepEqual(producer.batchStats(), { batches: 3, jobs: 10 });
    assert.equal(await producer.webhookQueue.count(), 10);
  });

  test('maxBatchSize must be a positive integer', () => {
    assert.throws(
      () => createWebhookProducer({ maxBatchSize: 0 }),
      /maxBatchSize must be a positive integer/,
    );
  });

  test('when Redis refuses a batch, every add of it rejects with QueueUnavailableError and none is stored', async (t) => {
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

    assert.deepEqual(producer.batchStats(), { batches: 1, jobs: 8 });
    for (const outcome of outcomes) {
      assert.equal(outcome.status, 'rejected');
      assert.ok(outcome.reason instanceof QueueUnavailableError, String(outcome.reason));
      assert.match(outcome.reason.message, /OOM/);
    }
    await admin.config('SET', 'maxmemory', '0');
    assert.equal(await producer.webhookQueue.count(), 0);
  });
});
