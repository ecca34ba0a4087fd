import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { startApi } from '../../src/api/server.js';
import { loadConfig } from '../../src/config/config.js';
import { POLL_REQUEST_QUEUE, pollRequestJobId } from '../../src/queue/poll-request-queue.js';
import { DEFAULT_QUEUE_PREFIX } from '../../src/queue/webhook-queue.js';
import { privateRedis } from '../helpers/redis.js';
import { snapshot, tempStore } from '../helpers/store.js';
import { cleanupScope } from '../helpers/worker.js';

test('the API process queues a refresh as an early-poll request for the reconciler, in Redis', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const { store, path } = await tempStore(t, { now: Date.now });
  await store.writer.applyOrderSnapshot(snapshot('SHOP-9', 'PENDING'), { source: 'create' });
  const { token } = await store.tokens.create('till', ['orders:write']);
  const api = await startApi(loadConfig({ REDIS_URL: redis.url, H2H_DB_PATH: path, API_PORT: '0' }));
  t.after(() => api.close());

  const answer = await request(`${api.origin}/v1/orders/SHOP-9/refresh`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
  });
  assert.equal(answer.statusCode, 202);
  await answer.body.dump();

  const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
  const queue = new Queue(POLL_REQUEST_QUEUE, { connection, prefix: DEFAULT_QUEUE_PREFIX });
  t.after(async () => {
    await queue.close();
    connection.disconnect();
  });
  const job = await queue.getJob(pollRequestJobId({ partnerRef: 'SHOP-9', reason: 'shop_request' }));
  assert.deepEqual(job?.data, { partnerRef: 'SHOP-9', reason: 'shop_request' });
});
