import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import {
  POLL_REQUEST_JOB_NAME,
  POLL_REQUEST_QUEUE,
  type PollRequestData,
  pollRequestJobId,
} from '../../src/queue/poll-request-queue.js';
import { startWorkerProcess } from '../../src/worker/server.js';
import { metricValue } from '../helpers/reconciler.js';
import { privateRedis } from '../helpers/redis.js';
import { httpRequest, userIdEndingIn } from '../helpers/simulator.js';
import { openTestStore, planFirstPolls, scheduleSettings, tempDbPath } from '../helpers/store.js';
import { twoSimulatedUpstreams } from '../helpers/upstreams.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope } from '../helpers/worker.js';

/** Two simulated upstreams, a private Redis, a store file, and the settings of a worker on both. */
async function workerOnTwoUpstreams(
  test: Parameters<typeof privateRedis>[0],
  env: Record<string, string> = {},
) {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const upstreams = await twoSimulatedUpstreams(t);
  const dbPath = tempDbPath(t);
  const store = await openTestStore(dbPath, scheduleSettings({ firstPollDelayMs: 0 }));
  t.after(() => store.close());
  await planFirstPolls(store, 'beta');
  const config = loadConfig({
    REDIS_URL: redis.url,
    H2H_DB_PATH: dbPath,
    ...upstreams.env,
    RECONCILE_EVERY_S: '1',
    RECONCILE_FIRST_POLL_DELAY_S: '0',
    RECONCILE_BACKOFF_S: '1',
    ...env,
  });
  return { t, redis, upstreams, store, config };
}

test("a worker with two upstreams sends and polls each upstream's orders with that upstream's client only, to their final states, and labels its metrics by upstream", async (test) => {
  const { t, redis, upstreams, store, config } = await workerOnTwoUpstreams(test);
  // beta's order was first heard of in a beta webhook; its later webhooks are lost.
  const betaPlaced = await upstreams.createOrder('beta', 'beta-order');
  await store.writer.applyOrderSnapshot(betaPlaced, {
    source: 'webhook',
    eventId: 'beta/evt-1',
    upstream: 'beta',
  });
  const defaultPlaced = await upstreams.createOrder('default', 'default-order');
  await store.writer.applyOrderSnapshot(defaultPlaced, { source: 'create' });

  // Queued for the pumps (the shop API's way): each is sent by its own upstream's pump.
  for (const upstream of ['default', 'beta']) {
    await store.writer.createLocalOrder({
      partnerRef: `${upstream}-queued`,
      productCode: 'MLBB-86',
      data: { user_id: userIdEndingIn('0003'), server_id: '2001' },
      upstream,
      queued: true,
    });
  }

  const worker = await startWorkerProcess(config);
  t.after(() => worker.close());
  // The default's queue and scheduler keep today's names (an upgrade leaves one); beta has its own.
  for (const [queueName, schedulerId] of [
    ['h2h-reconcile', 'h2h-reconcile-every'],
    ['h2h-reconcile-beta', 'h2h-reconcile-every-beta'],
  ]) {
    const queue = new Queue(queueName!, { connection: { url: redis.url } });
    t.after(() => queue.close());
    assert.deepEqual(
      (await queue.getJobSchedulers()).map((s) => s.key),
      [schedulerId],
      `${queueName}'s scheduler`,
    );
  }

  const truth = {
    beta: await upstreams.orderOnceIn('beta', 'beta-order', 'SUCCESS'),
    default: await upstreams.orderOnceIn('default', 'default-order', 'SUCCESS'),
  };
  for (const [ref, upstream] of [
    ['beta-order', 'beta'],
    ['default-order', 'default'],
  ] as const) {
    const local = await waitFor(
      async () => {
        const order = await store.queries.getOrder(ref);
        return order?.status === 'SUCCESS' ? order : undefined;
      },
      { timeoutMs: 20_000, message: `${ref} polled to SUCCESS` },
    );
    assert.equal(local.upstream, upstream);
    assert.equal(local.serialNumber, truth[upstream].serial_number);
    assert.ok((await store.queries.listEvents(ref)).some((e) => e.source === 'poll' && e.changed));
  }
  const gets = { default: upstreams.logs.default.getsByRef(), beta: upstreams.logs.beta.getsByRef() };
  assert.ok((gets.beta.get('beta-order') ?? 0) >= 1, "beta's order is polled on beta");
  assert.ok((gets.default.get('default-order') ?? 0) >= 1, "the default's order is polled on the default");
  assert.equal(
    gets.default.get('beta-order'),
    undefined,
    "the default upstream is never asked about beta's order",
  );
  assert.equal(gets.beta.get('default-order'), undefined, "beta is never asked about the default's order");

  const sent = await waitFor(
    async () => {
      const orders = await Promise.all(
        ['default-queued', 'beta-queued'].map((ref) => store.queries.getOrder(ref)),
      );
      return orders.every((o) => o?.submissionState === 'accepted') ? orders : undefined;
    },
    { message: 'both queued orders sent' },
  );
  assert.deepEqual(
    sent.map((o) => o?.upstream),
    ['default', 'beta'],
  );
  const creates = async (upstream: 'default' | 'beta') =>
    (await httpRequest<{ partner_ref: string }[]>(`${upstreams[upstream].origin}/__sim/orders`)).body
      .map((o) => o.partner_ref)
      .filter((ref) => ref.endsWith('-queued'));
  assert.deepEqual(
    await creates('default'),
    ['default-queued'],
    "the default's pump sends to the default only",
  );
  assert.deepEqual(await creates('beta'), ['beta-queued'], "beta's pump sends to beta only");

  const metrics = worker.reconcilerMetrics!;
  for (const upstream of ['default', 'beta']) {
    assert.ok(
      (await metricValue(metrics, 'h2h_reconcile_polls_total', { upstream, outcome: 'changed' })) >= 1,
      `${upstream}'s changing poll counted under its label`,
    );
  }
  assert.ok(
    (await metricValue(metrics, 'h2h_reconcile_circuit_open', {
      upstream: 'beta',
      cause: 'unauthorized',
    })) === 0,
    "beta's circuit gauge is there, closed",
  );
});

test("a shop's early-poll request of a beta order is polled with beta's client, and finds the refund its lost webhook told", async (test) => {
  // No scheduled pass polls or audits anything: only the request can find the refund.
  const { t, redis, upstreams, store, config } = await workerOnTwoUpstreams(test, {
    RECONCILE_EVERY_S: '3600',
    RECONCILE_AUDIT_WINDOW_D: '0',
  });
  await upstreams.createOrder('beta', 'beta-refunded');
  const settled = await upstreams.orderOnceIn('beta', 'beta-refunded', 'SUCCESS');
  await store.writer.applyOrderSnapshot(settled, {
    source: 'webhook',
    eventId: 'beta/evt-2',
    upstream: 'beta',
  });
  assert.equal(
    (await store.queries.getOrder('beta-refunded'))?.nextPollAt,
    null,
    'settled: no pass polls it',
  );
  const refund = await httpRequest(`${upstreams.beta.origin}/__sim/orders/beta-refunded/refund`, {
    method: 'POST',
    json: { after_days: 0 },
  });
  assert.equal(refund.status, 200, refund.text);
  await upstreams.orderOnceIn('beta', 'beta-refunded', 'REFUNDED');

  const worker = await startWorkerProcess(config);
  t.after(() => worker.close());
  // As the shop API asks: by partner_ref, without naming an upstream.
  const queue = new Queue<PollRequestData>(POLL_REQUEST_QUEUE, { connection: { url: redis.url } });
  t.after(() => queue.close());
  const request: PollRequestData = { partnerRef: 'beta-refunded', reason: 'shop_request' };
  await queue.add(POLL_REQUEST_JOB_NAME, request, { jobId: pollRequestJobId(request) });

  const refunded = await waitFor(
    async () => {
      const order = await store.queries.getOrder('beta-refunded');
      return order?.status === 'REFUNDED' ? order : undefined;
    },
    { message: 'the early poll to find the refund' },
  );
  assert.equal(refunded.upstream, 'beta');
  assert.equal(upstreams.logs.beta.getsByRef().get('beta-refunded'), 1, 'read once, on beta');
  assert.equal(upstreams.logs.default.gets().length, 0, 'the default upstream is asked nothing');
});

test("a worker refuses to start when an upstream's key is missing, naming its variable, and leaves the other upstream's engine stopped", async (test) => {
  const { t, redis, config } = await workerOnTwoUpstreams(test, { H2H_UPSTREAM_BETA_API_KEY: '' });
  const admin = new Redis(redis.url);
  t.after(() => admin.disconnect());

  await assert.rejects(
    startWorkerProcess(config),
    (error: unknown) =>
      error instanceof ConfigError &&
      /upstream "beta": H2H_UPSTREAM_BETA_API_KEY must be set/.test(error.message),
  );
  await waitFor(
    async () =>
      !/ name=h2h-(reconciler|budget|poll-requests|catalog) /.test(
        String(await admin.call('CLIENT', 'LIST')),
      ),
    { message: "the default upstream's reconciler and budget connections closed" },
  );
});
