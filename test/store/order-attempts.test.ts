import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { OrderRoute } from '../../src/domain/attempts.js';
import { withClaims } from '../../src/store/order-store.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import { snapshot, type TestStore } from '../helpers/store.js';
import { describeEachBackend, type StoreBackend } from '../helpers/store-backends.js';

const DATA = { user_id: '12345678', server_id: '2001' };

/** Routed to `default` first, then beta, then gamma (as the router writes it). */
const ROUTE: OrderRoute = {
  policy: 'cheapest',
  reason: 'cheapest: price 15000 on default (best of 3 available candidates)',
  next: [
    { upstream: 'beta', product_code: 'ML86-B', price: 15_500, product_name: 'ML 86 (beta)' },
    { upstream: 'gamma', product_code: 'ML86', price: 16_000 },
  ],
};

/**
 * A shop order routed by {@link ROUTE}: `queued` for its pump, or `sent` (its create on its way,
 * as the pump's claim and start leave it).
 */
async function routedOrder(
  backend: StoreBackend,
  t: Parameters<StoreBackend['tempStore']>[0],
  { ref = 'R1', sent = false } = {},
) {
  const opened = await backend.tempStore(t, { failover: { maxAttempts: 3, withinMs: 600_000 } });
  const { store } = opened;
  const order = { partnerRef: ref, productCode: 'ML86', data: DATA, route: ROUTE };
  await store.writer.admitQueuedOrder({ ...order, catalog: { name: 'ML 86', price: 15_000 } }, 100);
  if (sent) await sendNext(store, 'default');
  return opened;
}

/** What `upstream`'s pump does with the next order queued for it, up to its create call: its ref. */
async function sendNext(store: TestStore, upstream: string) {
  const claims = withClaims(store, store.claims.settings, upstream).claims;
  const claimed = await claims.claimNextQueued();
  await store.writer.startSubmission(claimed!.partnerRef, claimed!.claim, { leaseMs: 60_000 });
  return claimed!.partnerRef;
}

/** What the shop sees of its order's attempts: upstream, upstream ref, status or submission, why it ended. */
async function attemptsOf(store: TestStore, ref: string) {
  const order = await store.queries.getPublicOrderByPartnerRef(ref);
  return order?.attempts.map((a) => [
    a.upstream,
    a.partner_ref,
    a.status ?? a.submission,
    a.ended?.code ?? null,
  ]);
}

describeEachBackend('an order’s attempts on several upstreams', (backend) => {
  test('a create refused for INSUFFICIENT_BALANCE goes on to the next candidate at once, under <shop ref>~2, free for its pump', async (t) => {
    const { store } = await routedOrder(backend, t);
    const claimed = await store.claims.claimNextQueued();
    assert.equal(claimed?.partnerRef, 'R1');

    const after = await store.writer.markRejected('R1', 'INSUFFICIENT_BALANCE', 'balance too low', {
      claim: claimed.claim,
    });

    assert.equal(after.partnerRef, 'R1~2');
    assert.equal(after.shopRef, 'R1');
    assert.equal(after.upstream, 'beta');
    assert.equal(after.productCode, 'ML86-B');
    assert.equal(after.submissionState, 'queued');
    assert.deepEqual(await attemptsOf(store, 'R1'), [
      ['default', 'R1', 'rejected', 'INSUFFICIENT_BALANCE'],
      ['beta', 'R1~2', 'queued', null],
    ]);
    // The shop never saw the refusal as its order's outcome: one event, the order still open.
    const events = (await store.feed.after(0, 100)).filter((e) => e.type.startsWith('order.'));
    assert.deepEqual(
      events.map((e) => [e.type, (e.data as { outcome: string | null }).outcome]),
      [['order.updated', null]],
    );
    // The ended attempt's sender, late: its poll record and its create outcome settle nothing.
    await store.claims.recordPoll('R1', { claim: claimed.claim });
    await store.writer.markSubmissionUnknown('R1', { claim: claimed.claim });
    const unchanged = await store.queries.getOrder('R1');
    assert.equal(unchanged?.submissionState, 'queued');
    assert.equal(unchanged?.nextPollAt, null);
    assert.deepEqual(
      (await store.queries.listEvents('R1')).map((e) => [e.partnerRef, e.upstream, e.reason]),
      [
        ['R1', 'default', 'rejected'],
        ['R1', 'default', 'earlier_attempt'],
      ],
    );
    // beta's pump takes it at once; the default's has nothing.
    assert.equal(await store.claims.claimNextQueued(), undefined);
    const beta = withClaims(store, store.claims.settings, 'beta');
    assert.equal((await beta.claims.claimNextQueued())?.partnerRef, 'R1~2');
  });

  test('an order that ends FAILED goes on to the next candidate; the failed attempt is credited; its late webhooks change nothing', async (t) => {
    const { store, clock } = await routedOrder(backend, t, { sent: true });
    await store.catalog.applySync(catalogSnapshot({ readAt: clock.now(), price: 15_000, balance: 100_000 }));
    const named = { product_name: 'ML 86' };
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING', named), { source: 'create' });
    const failed = await store.writer.applyOrderSnapshot(snapshot('R1', 'FAILED', named), {
      source: 'webhook',
      eventId: 'e1',
    });

    assert.equal(failed.order.partnerRef, 'R1~2');
    assert.equal(failed.order.upstream, 'beta');
    assert.equal(failed.order.status, null);
    const balance = await store.balance.view();
    assert.equal(balance.debited, 15_000);
    assert.equal(balance.credited, 15_000);

    // The default upstream's SUCCESS for R1 (a supplier contradicting its own FAILED): recorded only.
    const late = await store.writer.applyOrderSnapshot(snapshot('R1', 'SUCCESS', { serial_number: 'SN' }), {
      source: 'webhook',
      eventId: 'e2',
    });
    assert.equal(late.reason, 'earlier_attempt');
    assert.equal(late.changed, false);
    const order = await store.queries.getPublicOrderByPartnerRef('R1');
    assert.equal(order?.status, null);
    assert.equal(order?.submission, 'queued');
    assert.deepEqual(await attemptsOf(store, 'R1'), [
      ['default', 'R1', 'FAILED', 'FAILED'],
      ['beta', 'R1~2', 'queued', null],
    ]);
    // Each attempt's trail stays its own.
    assert.deepEqual(
      (await store.queries.listEvents('R1')).map((e) => [e.partnerRef, e.status, e.reason]),
      [
        ['R1', 'PENDING', 'initial'],
        ['R1', 'FAILED', 'transition'],
        ['R1', 'SUCCESS', 'earlier_attempt'],
      ],
    );
  });

  test('no failover on a time-out, an unknown outcome, PENDING, PROCESSING or an invalid target', async (t) => {
    const { store } = await routedOrder(backend, t, { ref: 'U1', sent: true });
    await store.writer.markSubmissionUnknown('U1');
    await store.writer.applyOrderSnapshot(snapshot('U1', 'PENDING'), { source: 'poll' });
    await store.writer.applyOrderSnapshot(snapshot('U1', 'PROCESSING'), { source: 'poll' });
    assert.deepEqual(await attemptsOf(store, 'U1'), [['default', 'U1', 'PROCESSING', null]]);

    await store.writer.admitQueuedOrder(
      { partnerRef: 'T1', productCode: 'ML86', data: DATA, route: ROUTE },
      100,
    );
    const rejected = await store.writer.markRejected('T1', 'INVALID_TARGET', 'no such user');
    assert.equal(rejected.partnerRef, 'T1');
    assert.equal(rejected.submissionState, 'rejected');
    assert.deepEqual(await attemptsOf(store, 'T1'), [['default', 'T1', 'rejected', null]]);
  });

  test('after the last candidate, or H2H_MAX_ATTEMPTS, the order ends with its last attempt’s outcome and every reason', async (t) => {
    const { store } = await routedOrder(backend, t);
    await store.writer.markRejected('R1', 'INVALID_PRODUCT', 'not allowed through the API');
    assert.equal(await sendNext(store, 'beta'), 'R1~2');
    await store.writer.applyOrderSnapshot(snapshot('R1~2', 'FAILED'), {
      source: 'webhook',
      eventId: 'b1',
      upstream: 'beta',
    });
    assert.equal(await sendNext(store, 'gamma'), 'R1~3');
    const last = await store.writer.applyOrderSnapshot(snapshot('R1~3', 'FAILED'), {
      source: 'webhook',
      eventId: 'g1',
      upstream: 'gamma',
    });

    assert.equal(last.order.partnerRef, 'R1~3');
    assert.equal(last.order.status, 'FAILED');
    const order = await store.queries.getPublicOrderByPartnerRef('R1');
    assert.equal(order?.outcome, 'failed');
    assert.deepEqual(await attemptsOf(store, 'R1'), [
      ['default', 'R1', 'rejected', 'INVALID_PRODUCT'],
      ['beta', 'R1~2', 'FAILED', 'FAILED'],
      ['gamma', 'R1~3', 'FAILED', null],
    ]);

    // A late snapshot of attempt 2 is that attempt's, never a new order placed elsewhere.
    const late = await store.writer.applyOrderSnapshot(snapshot('R1~2', 'FAILED'), {
      source: 'poll',
      upstream: 'beta',
    });
    assert.equal(late.reason, 'earlier_attempt');
    assert.equal(late.created, false);
    assert.equal((await store.queries.listOrders()).length, 1);
  });

  test('H2H_MAX_ATTEMPTS and H2H_FAILOVER_WITHIN_S end the failover', async (t) => {
    const { store, clock } = await backend.tempStore(t, { failover: { maxAttempts: 2, withinMs: 60_000 } });
    for (const ref of ['M1', 'W1']) {
      await store.writer.admitQueuedOrder(
        { partnerRef: ref, productCode: 'ML86', data: DATA, route: ROUTE },
        100,
      );
    }
    await store.writer.markRejected('M1', 'INSUFFICIENT_BALANCE', 'low');
    await store.writer.markRejected('M1~2', 'INSUFFICIENT_BALANCE', 'low');
    clock.advance(60_000);
    await store.writer.markRejected('W1', 'INSUFFICIENT_BALANCE', 'low');

    assert.deepEqual(await attemptsOf(store, 'M1'), [
      ['default', 'M1', 'rejected', 'INSUFFICIENT_BALANCE'],
      ['beta', 'M1~2', 'rejected', null],
    ]);
    assert.deepEqual(await attemptsOf(store, 'W1'), [['default', 'W1', 'rejected', null]]);
  });

  test('the shop’s ref names its order whatever the attempt: a repeat replays it, and no new order can take it', async (t) => {
    const { store } = await routedOrder(backend, t);
    await store.writer.markRejected('R1', 'INSUFFICIENT_BALANCE', 'low');

    const repeat = await store.writer.admitQueuedOrder(
      { partnerRef: 'R1', productCode: 'ML86', data: DATA },
      100,
    );
    assert.ok(!('full' in repeat));
    assert.equal(repeat.created, false);
    assert.equal(repeat.order.partnerRef, 'R1~2');
    assert.equal((await store.queries.getOrder('R1'))?.partnerRef, 'R1~2');
    assert.equal((await store.queries.listOrders()).length, 1);
  });

  test('an order with a single upstream (no route) ends as before: FAILED is its outcome', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.createLocalOrder({ partnerRef: 'S1', productCode: 'ML86', data: DATA });
    const failed = await store.writer.applyOrderSnapshot(snapshot('S1', 'FAILED'), { source: 'create' });
    assert.equal(failed.order.partnerRef, 'S1');
    assert.equal(failed.order.status, 'FAILED');
    assert.deepEqual(await attemptsOf(store, 'S1'), [['default', 'S1', 'FAILED', null]]);
  });

  test('a refusal of a create sent again (after one without an answer) never fails over: the first may have landed', async (t) => {
    const { store, clock } = await routedOrder(backend, t);
    const claimed = (await store.claims.claimNextQueued())!;
    await store.writer.startSubmission('R1', claimed.claim, { leaseMs: 60_000 });
    await store.writer.markSubmissionUnknown('R1', { claim: claimed.claim });
    // The reconciler read 404 (the upstream had not committed the first yet) and sends it again.
    clock.advance(5_000);
    await store.writer.startSubmission('R1', claimed.claim, { leaseMs: 60_000, knownAbsent: true });
    const refused = await store.writer.markRejected('R1', 'INSUFFICIENT_BALANCE', 'the first took it', {
      claim: claimed.claim,
    });

    assert.equal(refused.partnerRef, 'R1');
    assert.deepEqual(await attemptsOf(store, 'R1'), [['default', 'R1', 'rejected', null]]);
  });

  test('an order refused for its target, then reported FAILED by the same supplier, stays on it: the shop was told it was refused', async (t) => {
    const { store } = await routedOrder(backend, t, { sent: true });
    await store.writer.markRejected('R1', 'INVALID_TARGET', 'no such player');
    const failed = await store.writer.applyOrderSnapshot(
      snapshot('R1', 'FAILED', { product_name: 'ML 86' }),
      {
        source: 'webhook',
        eventId: 'f1',
      },
    );
    assert.equal(failed.order.partnerRef, 'R1');
    assert.deepEqual(await attemptsOf(store, 'R1'), [['default', 'R1', 'FAILED', null]]);
  });

  test('when the next attempt’s ref already names another order, the order ends with its outcome instead', async (t) => {
    const { store } = await routedOrder(backend, t, { sent: true });
    // beta's own order under R1~2, first heard of in its webhook (placed elsewhere).
    await store.writer.applyOrderSnapshot(snapshot('R1~2', 'PROCESSING'), {
      source: 'webhook',
      eventId: 'b1',
      upstream: 'beta',
    });
    const named = { product_name: 'ML 86' };
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING', named), { source: 'create' });
    const failed = await store.writer.applyOrderSnapshot(snapshot('R1', 'FAILED', named), {
      source: 'webhook',
      eventId: 'e1',
    });

    assert.equal(failed.order.partnerRef, 'R1');
    assert.equal(failed.order.status, 'FAILED');
    assert.equal((await store.queries.getOrder('R1~2'))?.status, 'PROCESSING', "beta's order is its own");
  });

  test('a candidate no longer configured is passed over', async (t) => {
    const { store } = await backend.tempStore(t, {
      failover: { maxAttempts: 3, withinMs: 600_000, upstreams: ['default', 'gamma'] },
    });
    await store.writer.admitQueuedOrder(
      { partnerRef: 'R1', productCode: 'ML86', data: DATA, route: ROUTE },
      100,
    );
    await store.writer.markRejected('R1', 'INSUFFICIENT_BALANCE', 'low');
    // beta was removed from the upstreams file: the next attempt is gamma's, numbered 2.
    assert.deepEqual(await attemptsOf(store, 'R1'), [
      ['default', 'R1', 'rejected', 'INSUFFICIENT_BALANCE'],
      ['gamma', 'R1~2', 'queued', null],
    ]);
  });

  test('what a sender records late about an ended later attempt changes nothing and is never an error', async (t) => {
    const { store } = await routedOrder(backend, t);
    await store.writer.markRejected('R1', 'INSUFFICIENT_BALANCE', 'low');
    const claim = (await withClaims(store, store.claims.settings, 'beta').claims.claimNextQueued())!.claim;
    await store.writer.startSubmission('R1~2', claim, { leaseMs: 60_000 });
    await store.writer.applyOrderSnapshot(snapshot('R1~2', 'FAILED'), { source: 'poll', upstream: 'beta' });
    const before = await store.queries.getOrder('R1');
    assert.equal(before?.partnerRef, 'R1~3');

    // beta's pump and reconciler, late, about R1~2.
    await store.writer.markSubmissionUnknown('R1~2', { claim });
    await store.claims.recordPoll('R1~2', { claim });
    await store.claims.recordFailedPoll('R1~2', { claim });
    assert.equal(await store.writer.startSubmission('R1~2', claim, { leaseMs: 60_000 }), undefined);

    assert.deepEqual(await store.queries.getOrder('R1'), before);
  });
});
