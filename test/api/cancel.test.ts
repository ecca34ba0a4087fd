import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import { buildApiApp } from '../../src/api/app.js';
import { startSubmissionPump } from '../../src/orders/submission-pump.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { defaultApiLimits, sendApi } from '../helpers/api.js';
import { startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend, type StoreBackend } from '../helpers/store-backends.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope } from '../helpers/worker.js';

/**
 * The API on a real port of 127.0.0.1 over a store of `backend` on the real clock, and a token
 * with both scopes; `call` sends a request with it (or with `token`) and reads the answer.
 */
async function startApi(t: Pick<TestContext, 'after'>, backend: StoreBackend) {
  const { store } = await backend.tempStore(t, { now: Date.now });
  const app = await buildApiApp({ store, ...defaultApiLimits(), requestPoll: async () => {} });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.after(() => app.close());
  const origin = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  const { token: shop } = await store.tokens.create('shop', ['orders:read', 'orders:write']);
  const call = (method: 'GET' | 'POST', path: string, body?: unknown, token = shop) =>
    sendApi(origin, token, method, path, body);
  const cancel = (ref: string, token = shop) =>
    call('POST', `/v1/orders/${encodeURIComponent(ref)}/cancel`, undefined, token);
  return { store, call, cancel };
}

/** An order the simulator accepts and leaves PENDING (a user id ending in 0007). */
const ORDER = { product_code: 'MLBB-86', data: { user_id: userIdEndingIn('0007'), server_id: '2001' } };

/**
 * Writes order `ref` queued, as the API does (or `pending`, being sent, as `order create` does),
 * with data matching {@link snapshot}'s target.
 */
function queue(store: OrderStore, ref: string, { queued = true }: { queued?: boolean } = {}) {
  return store.writer.createLocalOrder({
    partnerRef: ref,
    productCode: 'ML86',
    data: { user_id: '12345678', server_id: '2001' },
    queued,
  });
}

/** The feed's events (every one, oldest first) of order `ref`, by type. */
async function feedTypesOf(store: OrderStore, ref: string): Promise<string[]> {
  return (await store.feed.after(0, 1000))
    .filter((e) => (e.data as { partner_ref?: string }).partner_ref === ref)
    .map((e) => e.type);
}

describeEachBackend('POST /v1/orders/:ref/cancel', (backend) => {
  test('a queued order is cancelled: 200 with submission and outcome cancelled and one order.cancelled event; a second cancel answers the same order and adds none; the pump never sends it', async (t) => {
    const scope = cleanupScope(t);
    const { store, call, cancel } = await startApi(scope, backend);
    const placed = await call('POST', '/v1/orders', { ...ORDER, partner_ref: 'gave-up' });
    assert.equal(placed.status, 202);
    assert.equal(placed.body.submission, 'queued');

    const cancelled = await cancel('gave-up');
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    assert.equal(cancelled.body.partner_ref, 'gave-up');
    assert.equal(cancelled.body.submission, 'cancelled');
    assert.equal(cancelled.body.outcome, 'cancelled');
    assert.equal(cancelled.body.cancellation.code, 'CANCELLED');
    assert.equal(cancelled.body.status, null);
    assert.equal(cancelled.body.version, 1);
    assert.deepEqual((await call('GET', '/v1/orders/gave-up')).body, cancelled.body);
    const feed = (await call('GET', '/v1/events?after=0')).body.data;
    assert.deepEqual(
      feed.map((e: { type: string; data: { partner_ref: string } }) => [e.type, e.data.partner_ref]),
      [['order.cancelled', 'gave-up']],
    );
    assert.deepEqual(feed[0].data, cancelled.body, 'the event carries the cancelled order');

    const again = await cancel('gave-up');
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, cancelled.body, 'the same order, unchanged');
    assert.deepEqual(await feedTypesOf(store, 'gave-up'), ['order.cancelled'], 'no second event');

    // The pump sends in arrival order: once the order queued after it is sent, it would have
    // been sent first.
    const later = await call('POST', '/v1/orders', { ...ORDER, partner_ref: 'still-wanted' });
    assert.equal(later.status, 202);
    const sim = await startSimulator(scope);
    const client = new UpstreamClient({ baseUrl: sim.sim.baseUrl, apiKey: sim.member.api_key });
    scope.after(() => client.close());
    const pump = startSubmissionPump({ store, client, idleMs: 20 });
    scope.after(() => pump.stop());
    await waitFor(async () => (await call('GET', '/v1/orders/still-wanted')).body.submission === 'accepted', {
      message: 'the order queued after the cancelled one accepted upstream',
    });
    assert.deepEqual(
      (await sim.allOrders()).map((o) => o.partner_ref),
      ['still-wanted'],
      'the cancelled order never reached the upstream',
    );
    assert.deepEqual(pump.sent, { accepted: 1, rejected: 0, blocked: 0, unknown: 0 });
    assert.deepEqual((await call('GET', '/v1/orders/gave-up')).body, cancelled.body);
  });

  test('an order sent or being sent answers 409 ORDER_ALREADY_SUBMITTED and stays as it was: accepted, unknown, pending, blocked with a create in doubt, queued and claimed by the pump right now', async (t) => {
    const { store, call, cancel } = await startApi(t, backend);
    const { writer } = store;
    await queue(store, 'accepted', { queued: false });
    await writer.applyOrderSnapshot(snapshot('accepted', 'PENDING'), { source: 'create' });
    await queue(store, 'unknown');
    await writer.markSubmissionUnknown('unknown');
    await queue(store, 'pending', { queued: false });
    await queue(store, 'in-doubt');
    await writer.markBlocked('in-doubt', 'INVALID_API_KEY', 'key refused after a time-out', {
      inDoubt: true,
    });
    await queue(store, 'claimed');
    const claim = await store.claims.claimNextQueued();
    assert.equal(claim?.partnerRef, 'claimed', 'the pump’s claim, held now');

    const refs = ['accepted', 'unknown', 'pending', 'in-doubt', 'claimed'];
    const submissions = ['accepted', 'unknown', 'pending', 'blocked', 'queued'];
    const before = await Promise.all(refs.map(async (ref) => (await call('GET', `/v1/orders/${ref}`)).body));
    assert.deepEqual(
      before.map((o) => o.submission),
      submissions,
    );
    const feedBefore = await store.feed.after(0, 1000);

    for (const [i, ref] of refs.entries()) {
      const refused = await cancel(ref);
      assert.equal(refused.status, 409, `${ref}: ${JSON.stringify(refused.body)}`);
      assert.equal(refused.body.error.code, 'ORDER_ALREADY_SUBMITTED', ref);
      assert.match(
        refused.body.error.message,
        new RegExp(
          `order ${ref} was already sent .*\\(submission ${submissions[i]}\\).*follow it to its outcome`,
        ),
      );
    }
    const after = await Promise.all(refs.map(async (ref) => (await call('GET', `/v1/orders/${ref}`)).body));
    assert.deepEqual(after, before, 'each order as it was');
    assert.deepEqual(await store.feed.after(0, 1000), feedBefore, 'no event');
    const stillClaimed = await store.writer.startSubmission('claimed', claim!.claim, {
      leaseMs: store.claims.settings.leaseMs,
    });
    assert.ok(stillClaimed, 'the claim’s holder may still send it');
  });

  test('a blocked order with nothing in doubt is cancelled; an unknown ref is 404; a token without orders:write is 403', async (t) => {
    const { store, call, cancel } = await startApi(t, backend);
    await queue(store, 'blocked');
    await store.writer.markBlocked('blocked', 'INVALID_API_KEY', 'the key was refused');
    const blocked = (await call('GET', '/v1/orders/blocked')).body;
    assert.equal(blocked.submission, 'blocked');

    const reader = (await store.tokens.create('reader', ['orders:read'])).token;
    const forbidden = await cancel('blocked', reader);
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.body.error.code, 'SCOPE_MISSING');
    assert.deepEqual((await call('GET', '/v1/orders/blocked')).body, blocked, 'not cancelled');

    const cancelled = await cancel('blocked');
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    assert.equal(cancelled.body.submission, 'cancelled');
    assert.equal(cancelled.body.outcome, 'cancelled');
    assert.equal(cancelled.body.blocked, null);
    assert.equal(cancelled.body.cancellation.code, 'CANCELLED');
    assert.deepEqual(await feedTypesOf(store, 'blocked'), ['order.blocked', 'order.cancelled']);
    assert.deepEqual(
      await store.claims.claimDueForPoll(10, { dueBy: Date.now() + 86_400_000 }),
      [],
      'the reconciler no longer submits it again',
    );

    const missing = await cancel('no-such-order');
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'ORDER_NOT_FOUND');
  });
});
