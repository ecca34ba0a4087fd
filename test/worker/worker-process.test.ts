import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { placeOrder } from '../../src/orders/place-order.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { startWorkerProcess } from '../../src/worker/server.js';
import { privateRedis } from '../helpers/redis.js';
import { startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { openTestStore, orderEvents, scheduleSettings, snapshot, tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope } from '../helpers/worker.js';

test('the worker process also reconciles: an order whose webhooks are all lost reaches its final state', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const sim = await startSimulator(t);
  await sim.setFaults({ webhook_drop: 1 });
  const dbPath = tempDbPath(t);
  const config = loadConfig({
    REDIS_URL: redis.url,
    H2H_DB_PATH: dbPath,
    H2H_BASE_URL: sim.sim.baseUrl,
    H2H_API_KEY: sim.member.api_key,
    RECONCILE_EVERY_S: '1',
    RECONCILE_FIRST_POLL_DELAY_S: '0',
    RECONCILE_BACKOFF_S: '1',
  });
  const worker = await startWorkerProcess(config);
  t.after(() => worker.close());

  const store = await openTestStore(dbPath, scheduleSettings({ firstPollDelayMs: 0 }));
  t.after(() => store.close());
  const client = new UpstreamClient({ baseUrl: sim.sim.baseUrl, apiKey: sim.member.api_key });
  t.after(() => client.close());
  const placed = await placeOrder(
    { client, store },
    { productCode: 'MLBB-86', data: { user_id: userIdEndingIn('0003'), server_id: '1234' } },
  );
  assert.equal(placed.outcome, 'accepted');

  const truth = await waitFor(
    async () => {
      const upstream = (await sim.allOrders()).find((o) => o.partner_ref === placed.order.partnerRef);
      return upstream?.status === 'SUCCESS' ? upstream : undefined;
    },
    { message: 'the simulator to finish the timeline' },
  );
  const local = await waitFor(
    async () => {
      const order = await store.queries.getOrder(placed.order.partnerRef);
      return order?.status === 'SUCCESS' ? order : undefined;
    },
    { timeoutMs: 20_000, message: 'the reconciler to poll the order to SUCCESS' },
  );
  assert.equal(local.serialNumber, truth.serial_number);
  assert.ok((await store.queries.listEvents(local.partnerRef)).some((e) => e.source === 'poll' && e.changed));
  assert.ok(
    (await sim.control('/webhooks')).body.every((a: { error: string | null }) => a.error === 'dropped'),
  );
});

test('a worker that reconciles refuses to start without the upstream URL and key, naming them', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const config = loadConfig({ REDIS_URL: redis.url, H2H_DB_PATH: tempDbPath(t) });
  await assert.rejects(
    startWorkerProcess(config),
    (error: unknown) => error instanceof ConfigError && /H2H_BASE_URL and H2H_API_KEY/.test(error.message),
  );
});

test('the worker prunes change-feed events older than H2H_FEED_RETENTION_D when it starts, and keeps newer ones', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  const day = 86_400_000;
  let now = Date.now() - 3 * day;
  const store = await openTestStore(dbPath, scheduleSettings(), { now: () => now });
  t.after(() => store.close());
  await store.writer.applyOrderSnapshot(snapshot('THREE-DAYS-OLD', 'PENDING'), { source: 'create' });
  now = Date.now();
  await store.writer.applyOrderSnapshot(snapshot('FRESH', 'PENDING'), { source: 'create' });

  const worker = await startWorkerProcess(
    loadConfig({
      REDIS_URL: redis.url,
      H2H_DB_PATH: dbPath,
      RECONCILE_ENABLED: 'false',
      H2H_FEED_RETENTION_D: '2',
    }),
  );
  t.after(() => worker.close());
  assert.deepEqual(
    orderEvents(await store.feed.after(0)).map((e) => e.data.partner_ref),
    ['FRESH'],
  );
});

test('the worker cancels as EXPIRED the orders queued longer than API_SUBMISSION_MAX_AGE_S, an hour by default, and sends the younger ones', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const sim = await startSimulator(t);
  const dbPath = tempDbPath(t);
  let now = Date.now() - 3_600_000 - 60_000;
  const store = await openTestStore(dbPath, scheduleSettings(), { now: () => now });
  t.after(() => store.close());
  const queue = (partnerRef: string) =>
    store.writer.createLocalOrder({
      partnerRef,
      productCode: 'MLBB-86',
      data: { user_id: userIdEndingIn('0007'), server_id: '2001' },
      queued: true,
    });
  await queue('STALE');
  now = Date.now() - 3_600_000 + 60_000;
  await queue('FRESH');

  const worker = await startWorkerProcess(
    loadConfig({
      REDIS_URL: redis.url,
      H2H_DB_PATH: dbPath,
      H2H_BASE_URL: sim.sim.baseUrl,
      H2H_API_KEY: sim.member.api_key,
    }),
  );
  t.after(() => worker.close());
  await waitFor(async () => (await store.queries.getOrder('FRESH'))?.submissionState === 'accepted', {
    message: 'the order queued 59 minutes ago accepted upstream',
  });
  // The pump sweeps before it claims, so the older order was settled first.
  const stale = await store.queries.getOrder('STALE');
  assert.equal(stale?.submissionState, 'cancelled');
  assert.equal(stale?.cancelCode, 'EXPIRED');
  assert.deepEqual(
    (await sim.allOrders()).map((o) => o.partner_ref),
    ['FRESH'],
  );
});
