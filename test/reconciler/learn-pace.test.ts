import assert from 'node:assert/strict';
import { test } from 'node:test';
import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import { bucketMs, GROWTH, paceBucket } from '../../src/domain/pace-math.js';
import { learnPace } from '../../src/reconciler/learn-pace.js';
import { reconcileNames } from '../../src/reconciler/reconcile-queue.js';
import { startReconciler } from '../../src/reconciler/reconciler.js';
import { openStore } from '../../src/store/open-store.js';
import { type OrderStore, withClaims } from '../../src/store/order-store.js';
import { EVERY_PRODUCT } from '../../src/store/poll-plans.js';
import { readWebhookJob } from '../../src/worker/webhook-event.js';
import { reconcilerEnv, startTestReconciler } from '../helpers/reconciler.js';
import { snapshot, type TestStore } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const CREATED = Date.UTC(2026, 10, 1);
const iso = (ms: number) => new Date(ms).toISOString();

/** A seeded uniform [0, 1) stream (pure-rand, as the simulator draws), so every run learns from the same samples. */
function seeded(seed: number): () => number {
  const generator = xoroshiro128plus(seed);
  return () => uniformFloat64(generator);
}

/** Log-normal durations with this median and p99 (the realistic profile's shape), in ms. */
function logNormal(seed: number, medianMs: number, p99Ms: number): () => number {
  const random = seeded(seed);
  const sigma = Math.log(p99Ms / medianMs) / 2.326;
  return () => {
    const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
    return medianMs * Math.exp(sigma * z);
  };
}

/**
 * Delivers the final webhook of a new order of `product` that took `tookMs` from its creation
 * to SUCCESS (or FAILED), and reached us `deliveryMs` after its event, as the worker applies it.
 */
async function deliverFinal(
  store: OrderStore,
  ref: string,
  {
    product = 'ML86',
    tookMs,
    deliveryMs = 0,
    status = 'SUCCESS',
  }: { product?: string; tookMs: number; deliveryMs?: number; status?: 'SUCCESS' | 'FAILED' },
) {
  const reached = CREATED + tookMs;
  return await store.writer.applyOrderSnapshot(
    snapshot(ref, status, {
      product_code: product,
      created_at: iso(CREATED),
      success_at: status === 'SUCCESS' ? iso(reached) : null,
      serial_number: status === 'SUCCESS' ? 'SN' : null,
    }),
    { source: 'webhook', eventId: `evt-${ref}`, occurredAt: reached, receivedAt: reached + deliveryMs },
  );
}

/** What a reconcile pass does first: learns the pace from what the store recorded, and writes the plans. */
function learn(store: TestStore, options: { windowEvents?: number } = {}) {
  return learnPace(store.pollPlans, store.claims.upstream, store.claims.settings, options);
}

/** The exact q-quantile of a sample (nearest rank). */
function exactQuantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

test('a bucket stands for its durations within the growth factor, from 1 ms to days', () => {
  for (const ms of [1, 2, 37, 999, 20_000, 180_000, 3_600_000, 86_400_000 * 3]) {
    const upper = bucketMs(paceBucket(ms));
    assert.ok(upper >= ms && upper <= ms * GROWTH, `${ms} ms reads back as ${upper}`);
  }
  assert.equal(bucketMs(paceBucket(0.2)), 1);
});

describeEachBackend('the pace the reconciler learns from recorded facts', (backend) => {
  test('the learned quantile of a log-normal completion time is within 10 % of the exact one', async (t) => {
    const { store } = await backend.tempStore(t, { firstPollQuantile: 0.95, paceMinSamples: 50 });
    const draw = logNormal(7, 20_000, 180_000);
    const took: number[] = [];
    for (let i = 0; i < 400; i++) {
      // Whole ms, as every time the store keeps (a receiver's clock, a webhook's timestamp).
      const ms = Math.round(draw());
      took.push(ms);
      await deliverFinal(store, `R${i}`, { tookMs: ms, status: i % 4 === 0 ? 'FAILED' : 'SUCCESS' });
    }
    const pace = (await learn(store)).get('ML86');
    assert.ok(pace);
    assert.notEqual(pace.outlierMs, null, "the product's own pace");
    assert.equal(pace.samples, 400);
    for (const q of [0.95]) {
      const exact = exactQuantile(took, q);
      assert.ok(
        Math.abs(pace.finalMs - exact) <= exact * 0.1,
        `p${q * 100}: learned ${pace.finalMs}, exact ${exact}`,
      );
    }
  });

  test('the first poll waits the fixed delay until enough final webhooks teach the pace, then their quantile plus the usual delivery delay', async (t) => {
    const { store, clock } = await backend.tempStore(t, {
      firstPollDelayMs: 45_000,
      firstPollQuantile: 0.9,
      paceMinSamples: 20,
      firstPollMinMs: 5_000,
      firstPollMaxMs: 900_000,
    });
    for (let i = 0; i < 19; i++)
      await deliverFinal(store, `L${i}`, { tookMs: (i + 1) * 10_000, deliveryMs: 2_000 });
    await learn(store);
    const early = await store.writer.createLocalOrder({ partnerRef: 'NEW1', productCode: 'ML86', data: {} });
    assert.equal(early.order.nextPollAt, clock.now() + 45_000, '19 samples are not enough: the fixed delay');

    await deliverFinal(store, 'L19', { tookMs: 200_000, deliveryMs: 2_000 });
    const unlearned = await store.writer.createLocalOrder({
      partnerRef: 'NEW2a',
      productCode: 'ML86',
      data: {},
    });
    assert.equal(unlearned.order.nextPollAt, clock.now() + 45_000, 'the writer learns nothing itself');
    await learn(store);
    const later = await store.writer.createLocalOrder({ partnerRef: 'NEW2', productCode: 'ML86', data: {} });
    // 20 samples 10 s … 200 s: the 90th percentile is 180 s; the median delivery 2 s.
    const expected = clock.now() + 180_000 + 2_000;
    const at = later.order.nextPollAt!;
    assert.ok(
      at >= expected && at <= clock.now() + (180_000 + 2_000) * GROWTH,
      `first poll ${at - clock.now()} ms`,
    );
  });

  test('the learned first poll is bounded by the minimum and maximum settings', async (t) => {
    const { store, clock } = await backend.tempStore(t, {
      firstPollQuantile: 0.5,
      paceMinSamples: 5,
      firstPollMinMs: 5_000,
      firstPollMaxMs: 60_000,
    });
    for (let i = 0; i < 5; i++) await deliverFinal(store, `FAST${i}`, { product: 'FAST', tookMs: 500 });
    for (let i = 0; i < 5; i++) await deliverFinal(store, `SLOW${i}`, { product: 'SLOW', tookMs: 3_600_000 });
    await learn(store);
    const fast = await store.writer.createLocalOrder({ partnerRef: 'F', productCode: 'FAST', data: {} });
    const slow = await store.writer.createLocalOrder({ partnerRef: 'S', productCode: 'SLOW', data: {} });
    assert.equal(fast.order.nextPollAt, clock.now() + 5_000);
    assert.equal(slow.order.nextPollAt, clock.now() + 60_000);
  });

  test('a product without enough samples of its own takes every product together', async (t) => {
    const { store } = await backend.tempStore(t, { firstPollQuantile: 0.5, paceMinSamples: 10 });
    for (let i = 0; i < 10; i++) await deliverFinal(store, `A${i}`, { product: 'A', tookMs: 40_000 });
    for (let i = 0; i < 3; i++) await deliverFinal(store, `B${i}`, { product: 'B', tookMs: 1_000 });
    const plans = await learn(store);
    assert.equal(plans.get('A')?.samples, 10, 'A has a plan of its own');
    assert.equal(plans.has('B'), false, 'B has none: it takes every product together');
    assert.equal(plans.get(EVERY_PRODUCT)?.samples, 13);
    assert.equal(plans.get(EVERY_PRODUCT)?.outlierMs, null, 'no outlier time from every product together');
  });

  test('a duplicate webhook, a serial added later and a poll of a state without a time teach nothing', async (t) => {
    const { store } = await backend.tempStore(t, { firstPollQuantile: 0.5, paceMinSamples: 1 });
    await store.writer.applyOrderSnapshot(snapshot('P1', 'PROCESSING'), { source: 'poll' });
    await store.writer.applyOrderSnapshot(snapshot('P2', 'FAILED'), { source: 'poll' });
    assert.equal(
      (await learn(store)).get(EVERY_PRODUCT)?.samples,
      0,
      'a poll does not say when PROCESSING or FAILED began',
    );

    await store.writer.applyOrderSnapshot(snapshot('S1', 'SUCCESS'), { source: 'poll' });
    await store.writer.applyOrderSnapshot(snapshot('S1', 'SUCCESS', { serial_number: 'SN' }), {
      source: 'poll',
    });
    await deliverFinal(store, 'S2', { tookMs: 60_000 });
    await deliverFinal(store, 'S2', { tookMs: 60_000 });
    assert.equal((await learn(store)).get('ML86')?.samples, 2, 'S1 by its success_at, S2 once');
  });

  test("a serial that follows a SUCCESS without success_at teaches nothing: the time to SUCCESS is the first webhook's", async (t) => {
    const { store } = await backend.tempStore(t, { firstPollQuantile: 0.5, paceMinSamples: 1 });
    const order = (serial: string | null) =>
      snapshot('S3', 'SUCCESS', {
        product_code: 'LATE',
        created_at: iso(CREATED),
        success_at: null,
        serial_number: serial,
      });
    await store.writer.applyOrderSnapshot(order(null), {
      source: 'webhook',
      eventId: 's3-success',
      occurredAt: CREATED + 30_000,
      receivedAt: CREATED + 30_000,
    });
    await store.writer.applyOrderSnapshot(order('SN3'), {
      source: 'webhook',
      eventId: 's3-serial',
      occurredAt: CREATED + 600_000,
      receivedAt: CREATED + 600_000,
    });
    const late = (await learn(store)).get('LATE')!;
    assert.equal(late.samples, 1);
    assert.ok(late.finalMs >= 30_000 && late.finalMs <= 30_000 * GROWTH, `learned ${late.finalMs} ms`);
  });

  test('a store no reconciler has planned yet polls a new order 30 s after it, whatever a setting says', async (t) => {
    const { url, clock } = await backend.tempStore(t, { firstPollDelayMs: 45_000 });
    const plain = await openStore(url, { role: 'test', now: clock.now });
    t.after(() => plain.close());
    await plain.db.run('DELETE FROM poll_plans');
    const { order } = await plain.writer.createLocalOrder({
      partnerRef: 'N1',
      productCode: 'ML86',
      data: {},
    });
    assert.equal(order.nextPollAt, clock.now() + 30_000);
  });

  test('only the most recent events teach, so the pace follows an upstream whose pace changes', async (t) => {
    const { store } = await backend.tempStore(t, { firstPollQuantile: 0.5, paceMinSamples: 10 });
    for (let i = 0; i < 30; i++) await deliverFinal(store, `OLD${i}`, { tookMs: 10_000 });
    assert.ok((await learn(store, { windowEvents: 30 })).get('ML86')!.finalMs < 11_000);
    for (let i = 0; i < 30; i++) await deliverFinal(store, `NEW${i}`, { tookMs: 100_000 });
    const pace = (await learn(store, { windowEvents: 30 })).get('ML86')!;
    assert.ok(pace.finalMs >= 100_000 && pace.finalMs < 110_000, `median now ${pace.finalMs}`);
    assert.equal(pace.samples, 30);
  });

  test("a process that opens the store without the reconciler's settings (the API, the CLI) writes the plan the reconciler learned", async (t) => {
    const { store, url, clock } = await backend.tempStore(t, {
      firstPollQuantile: 0.5,
      paceMinSamples: 5,
      firstPollMinMs: 5_000,
      firstPollMaxMs: 900_000,
    });
    for (let i = 0; i < 5; i++) await deliverFinal(store, `R${i}`, { tookMs: 120_000 });
    await learn(store);
    const writer = await openStore(url, { role: 'test', now: clock.now });
    t.after(() => writer.close());
    const { order } = await writer.writer.createLocalOrder({
      partnerRef: 'API1',
      productCode: 'ML86',
      data: {},
    });
    const at = order.nextPollAt! - clock.now();
    assert.ok(at >= 120_000 && at <= 120_000 * GROWTH, `first poll ${at} ms after the order`);
  });

  test('with the quantile at 0 the first poll always waits the fixed delay', async (t) => {
    const { store, clock } = await backend.tempStore(t, {
      firstPollDelayMs: 30_000,
      firstPollQuantile: 0,
      paceMinSamples: 1,
    });
    for (let i = 0; i < 5; i++) await deliverFinal(store, `R${i}`, { tookMs: 1_000 });
    assert.deepEqual([...(await learn(store)).keys()], [EVERY_PRODUCT], 'one plan: the fixed delay');
    const order = await store.writer.createLocalOrder({ partnerRef: 'NEW', productCode: 'ML86', data: {} });
    assert.equal(order.order.nextPollAt, clock.now() + 30_000);
  });
});

test("a webhook's event time comes from its envelope, never from an order sent as the whole body", () => {
  const job = (body: unknown) => ({
    rawBody: JSON.stringify(body),
    rawBodyEncoding: 'utf8',
    dedupeKey: 'k',
    eventId: 'e',
    receivedAt: CREATED + 5_000,
  });
  const order = snapshot('R1', 'SUCCESS', { created_at: iso(CREATED) });
  const enveloped = readWebhookJob(
    job({ event_id: 'e', event: 'order.updated', created_at: iso(CREATED + 3_000), data: order }),
  );
  assert.equal(enveloped.options.occurredAt, CREATED + 3_000);
  assert.equal(readWebhookJob(job(order)).options.occurredAt, undefined);
});

test('a reconciler writes the first-poll plans of its settings when it starts, before its first pass', async (t) => {
  // Its first pass is an hour away: only the start can have written them.
  const env = await reconcilerEnv(t, { settings: { firstPollDelayMs: 7_000, everyMs: 3_600_000 } });
  env.db.prepare('DELETE FROM poll_plans').run(); // as on a store no reconciler has planned
  await startTestReconciler(env);
  const plans = await env.store.pollPlans.ofUpstream('default');
  assert.deepEqual([...plans.keys()], [EVERY_PRODUCT]);
  assert.equal(
    plans.get(EVERY_PRODUCT)!.minMs,
    7_000,
    'the fixed delay of its settings, nothing learned yet',
  );
});

test("each upstream's reconciler writes its own upstream's first-poll plans when it starts, under its own pass lock, and leaves another's as they are", async (t) => {
  const env = await reconcilerEnv(t, { settings: { firstPollDelayMs: 7_000, everyMs: 3_600_000 } });
  env.db.prepare('DELETE FROM poll_plans').run();
  await startTestReconciler(env);
  // The default upstream's pass lock held by another process: beta's reconciler takes its own.
  await env.redisClient.set(reconcileNames('default').lockKey, 'another-host', 'PX', 60_000);
  const betaStore = withClaims(env.store, { ...env.store.claims.settings, firstPollDelayMs: 9_000 }, 'beta');
  const beta = await startReconciler({
    settings: env.settings,
    store: betaStore,
    client: env.client,
    redisUrl: env.redis.url,
    logger: env.log.logger,
  });
  env.defer(() => beta.close());

  const fixedDelay = async (upstream: string) =>
    (await env.store.pollPlans.ofUpstream(upstream)).get(EVERY_PRODUCT)?.minMs;
  assert.equal(await fixedDelay('default'), 7_000, "the default's plans, left as its reconciler wrote them");
  assert.equal(await fixedDelay('beta'), 9_000, "beta's, of beta's reconciler's settings");
});
