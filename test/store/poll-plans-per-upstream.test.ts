import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GROWTH } from '../../src/domain/pace-math.js';
import { learnPace } from '../../src/reconciler/learn-pace.js';
import { openStore } from '../../src/store/open-store.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { withClaims } from '../../src/store/order-store.js';
import { EVERY_PRODUCT } from '../../src/store/poll-plans.js';
import { rewindToSchema25, snapshot, type TestStore } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const CREATED = Date.UTC(2026, 10, 1);
const iso = (ms: number) => new Date(ms).toISOString();
const DATA = { user_id: '12345678', server_id: '2001' };

/** The first-poll settings of these tests: the median of the time to final, from 5 samples, within 5 s … 15 min. */
const PACE = { firstPollQuantile: 0.5, paceMinSamples: 5, firstPollMinMs: 5_000, firstPollMaxMs: 900_000 };

/**
 * The final webhook of a new order of `upstream` that took `tookMs` from its creation upstream
 * to SUCCESS, as the worker applies it (its envelope as the payload).
 */
async function deliverFinal(store: OrderStore, ref: string, upstream: string, tookMs: number) {
  const reached = CREATED + tookMs;
  const order = snapshot(ref, 'SUCCESS', {
    created_at: iso(CREATED),
    success_at: iso(reached),
    serial_number: 'SN',
  });
  await store.writer.applyOrderSnapshot(order, {
    source: 'webhook',
    upstream,
    eventId: `evt-${ref}`,
    occurredAt: reached,
    receivedAt: reached,
    payload: { event_id: `evt-${ref}`, event: 'order.updated', created_at: iso(reached), data: order },
  });
}

/** What `upstream`'s reconciler does at its start and each pass: learns its pace, writes its plans. */
function learnAs(store: TestStore, upstream: string) {
  return learnPace(store.pollPlans, upstream, store.claims.settings);
}

/** When a new order of `upstream` is first polled, in ms from now. */
async function firstPollOf(store: TestStore, ref: string, upstream: string, now: number) {
  const { order } = await store.writer.createLocalOrder({
    partnerRef: ref,
    productCode: 'ML86',
    data: DATA,
    upstream,
  });
  return order.nextPollAt! - now;
}

const within = (ms: number, learned: number) => ms >= learned && ms <= learned * GROWTH;

describeEachBackend('the first-poll plans per upstream and product', (backend) => {
  test("two upstreams with different paces learn different plans, and each order's first poll follows its own upstream's", async (t) => {
    const { store, clock } = await backend.tempStore(t, PACE);
    for (let i = 0; i < 5; i++) {
      await deliverFinal(store, `D${i}`, 'default', 20_000);
      await deliverFinal(store, `B${i}`, 'beta', 200_000);
    }

    const betaPlans = await learnAs(store, 'beta');
    const defaultPlans = await learnAs(store, 'default');

    assert.ok(
      within(defaultPlans.get('ML86')!.finalMs, 20_000),
      `default ${defaultPlans.get('ML86')!.finalMs}`,
    );
    assert.ok(within(betaPlans.get('ML86')!.finalMs, 200_000), `beta ${betaPlans.get('ML86')!.finalMs}`);
    assert.equal(defaultPlans.get('ML86')!.samples, 5, "the default upstream's own orders only");
    assert.deepEqual(
      await store.pollPlans.ofUpstream('beta'),
      betaPlans,
      "learning the default's left beta's as they were",
    );
    // The first poll counts from the order's creation (now): its upstream's time to final.
    assert.ok(within(await firstPollOf(store, 'N-default', 'default', clock.now()), 20_000));
    assert.ok(within(await firstPollOf(store, 'N-beta', 'beta', clock.now()), 200_000));
    // A moved order too, and a poll that finds a change.
    const moved = await store.writer.applyOrderSnapshot(
      snapshot('N-beta', 'PENDING', { created_at: iso(clock.now()) }),
      { source: 'webhook', upstream: 'beta', eventId: 'beta-pending' },
    );
    assert.ok(within(moved.order.nextPollAt! - clock.now(), 200_000));
  });

  test("an upstream whose reconciler has planned nothing yet polls its orders after the fixed delay, never another upstream's learned plan", async (t) => {
    const { store, clock } = await backend.tempStore(t, PACE);
    for (let i = 0; i < 5; i++) await deliverFinal(store, `D${i}`, 'default', 600_000);
    await learnAs(store, 'default');

    assert.deepEqual(await store.pollPlans.ofUpstream('beta'), new Map());
    assert.equal(await firstPollOf(store, 'N-beta', 'beta', clock.now()), 30_000);
    assert.ok(within(await firstPollOf(store, 'N-default', 'default', clock.now()), 600_000));
  });

  test('an attempt that ended FAILED teaches its own upstream, not the one its order went on to', async (t) => {
    const { store, clock } = await backend.tempStore(t, {
      ...PACE,
      paceMinSamples: 1,
      failover: { maxAttempts: 2, withinMs: 600_000 },
    });
    await store.writer.admitQueuedOrder(
      {
        partnerRef: 'R1',
        productCode: 'ML86',
        data: DATA,
        catalog: { name: 'ML 86', price: 15_000 },
        route: {
          policy: 'cheapest',
          reason: 'cheapest: price 15000 on default (best of 2 available candidates)',
          next: [{ upstream: 'beta', product_code: 'ML86', price: 15_500 }],
        },
      },
      100,
    );
    const claimed = await store.claims.claimNextQueued();
    await store.writer.startSubmission('R1', claimed!.claim, { leaseMs: 60_000 });
    const named = { product_name: 'ML 86', created_at: iso(CREATED) };
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING', named), { source: 'create' });
    const failed = snapshot('R1', 'FAILED', named);
    const after = await store.writer.applyOrderSnapshot(failed, {
      source: 'webhook',
      eventId: 'e1',
      occurredAt: CREATED + 40_000,
      receivedAt: CREATED + 41_000,
      payload: { event_id: 'e1', event: 'order.updated', created_at: iso(CREATED + 40_000), data: failed },
    });
    assert.equal(after.order.partnerRef, 'R1~2', 'the order went on to beta');

    const defaultPlan = (await learnAs(store, 'default')).get('ML86');
    assert.equal(defaultPlan?.samples, 1, "the FAILED attempt is the default upstream's sample");
    assert.ok(within(defaultPlan.finalMs, 40_000), `${defaultPlan.finalMs}`);
    assert.equal(defaultPlan.deliveryMs >= 1_000 && defaultPlan.deliveryMs <= 1_000 * GROWTH, true);
    assert.equal((await learnAs(store, 'beta')).get(EVERY_PRODUCT)?.samples, 0, 'beta has learned nothing');
    // The order's next attempt, on beta, is polled as beta plans (the fixed delay), once sent.
    const betaClaims = withClaims(store, store.claims.settings, 'beta').claims;
    const next = await betaClaims.claimNextQueued();
    await store.writer.startSubmission(next!.partnerRef, next!.claim, { leaseMs: 60_000 });
    const accepted = await store.writer.applyOrderSnapshot(
      snapshot('R1~2', 'PENDING', { created_at: iso(clock.now()) }),
      { source: 'create', upstream: 'beta' },
    );
    assert.equal(accepted.order.nextPollAt! - clock.now(), store.claims.settings.firstPollDelayMs);
  });

  test("an upgrade from schema 25 keeps every first-poll plan as the default upstream's", async (t) => {
    const { store, url, clock } = await backend.tempStore(t, PACE);
    for (let i = 0; i < 5; i++) await deliverFinal(store, `D${i}`, 'default', 120_000);
    const before = await learnAs(store, 'default');
    assert.deepEqual([...before.keys()].sort(), [EVERY_PRODUCT, 'ML86']);
    await store.db.write((tx) => rewindToSchema25(tx));
    assert.deepEqual(
      (
        await store.db.all<{ product_code: string }>(
          'SELECT product_code FROM poll_plans ORDER BY product_code',
        )
      ).map((r) => r.product_code),
      [EVERY_PRODUCT, 'ML86'],
    );
    await store.close();

    // A writer (no reconciler, so nothing is learned again) on the upgraded store.
    const upgraded = await openStore(url, { role: 'test', now: clock.now });
    t.after(() => upgraded.close());
    assert.deepEqual(await upgraded.pollPlans.ofUpstream('default'), before);
    assert.deepEqual(await upgraded.pollPlans.ofUpstream('beta'), new Map());
    const { order } = await upgraded.writer.createLocalOrder({
      partnerRef: 'N1',
      productCode: 'ML86',
      data: DATA,
    });
    assert.ok(within(order.nextPollAt! - clock.now(), 120_000), `${order.nextPollAt! - clock.now()}`);
  });
});
