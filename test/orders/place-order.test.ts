import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PlaceOrderInputError, type PlaceOrderResult, placeOrder } from '../../src/orders/place-order.js';
import { StoreError } from '../../src/store/store-error.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { OrderInputError } from '../../src/upstream/errors.js';
import { fixtureProduct, startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { tempStore } from '../helpers/store.js';

const target = (suffix = '0001') => ({ user_id: userIdEndingIn(suffix), server_id: '1234' });

async function setup(t: Parameters<typeof startSimulator>[0], client: { headersTimeoutMs?: number } = {}) {
  const sim = await startSimulator(t);
  const { store } = await tempStore(t, { now: Date.now });
  const upstream = new UpstreamClient({
    baseUrl: sim.sim.baseUrl,
    apiKey: sim.member.api_key,
    headersTimeoutMs: client.headersTimeoutMs ?? 2000,
    retry: { maxAttempts: 3, baseDelayMs: 5, maxDelayMs: 20 },
  });
  t.after(() => upstream.close());
  return { sim, store, deps: { client: upstream, store } };
}

test('an accepted order is stored with the upstream snapshot and a generated sortable partner_ref', async (t) => {
  const { sim, store, deps } = await setup(t);
  const first = await placeOrder(deps, { productCode: 'MLBB-86', data: target() });
  const second = await placeOrder(deps, { productCode: 'MLBB-86', data: target() });
  assert.equal(first.outcome, 'accepted');
  assert.match(first.order.partnerRef, /^h2h-[0-9A-Z]{26}$/);
  assert.ok(first.order.partnerRef < second.order.partnerRef, 'generated refs sort by creation');
  const upstream = (await sim.allOrders()).find((o) => o.partner_ref === first.order.partnerRef);
  assert.equal(first.order.invoiceNumber, upstream?.invoice_number);
  assert.equal(first.order.status, 'PENDING');
  assert.equal(first.order.amount, 19_500);
  assert.deepEqual(
    (await store.queries.listEvents(first.order.partnerRef)).map((e) => [e.source, e.status, e.changed]),
    [['create', 'PENDING', true]],
  );
});

test('placing the same partner_ref again sends no second order and debits once', async (t) => {
  const { sim, store, deps } = await setup(t);
  const before = await sim.balance();
  const results = await Promise.all(
    Array.from({ length: 5 }, () =>
      placeOrder(deps, { productCode: 'MLBB-86', data: target(), partnerRef: 'same/ref ü' }),
    ),
  );
  // One holds the order's claim and sends it; one that comes while it is held leaves it to that
  // one, one that comes after finds it accepted.
  assert.ok(results.some((r) => r.outcome === 'accepted'));
  for (const r of results) {
    assert.ok(r.outcome === 'accepted' || (r.outcome === 'unknown' && r.cause === 'claimed'), r.outcome);
  }
  assert.equal((await store.queries.getOrder('same/ref ü'))?.submissionState, 'accepted');
  const upstream = (await sim.allOrders()).filter((o) => o.partner_ref === 'same/ref ü');
  assert.equal(upstream.length, 1);
  assert.equal(before - (await sim.balance()), 19_500);
  assert.equal((await store.queries.listOrders()).length, 1);
});

test('a used partner_ref asked for the same way, callback URL included, answers its order as it is; another product, data or callback URL is IDEMPOTENCY_CONFLICT and sends nothing', async (t) => {
  const { sim, store, deps } = await setup(t);
  const productId = fixtureProduct(sim.fixture, 'MLBB-86').id;
  const request = {
    productId,
    data: target(),
    callbackUrl: 'http://127.0.0.1:1/hooks/one',
    partnerRef: 'shop-7',
  };
  const first = await placeOrder(deps, request);
  assert.equal(first.outcome, 'accepted');
  assert.equal(first.order.productCode, 'MLBB-86', 'the upstream filled in the code');

  const again = await placeOrder(deps, {
    ...request,
    data: { server_id: '1234', user_id: target().user_id },
  });
  assert.equal(again.outcome, 'accepted');
  assert.equal(again.order.invoiceNumber, first.order.invoiceNumber);
  for (const [what, other] of [
    ['the code the upstream filled in', { ...request, productId: undefined, productCode: 'MLBB-86' }],
    ['no callback URL', { ...request, callbackUrl: undefined }],
    ['another callback URL', { ...request, callbackUrl: 'http://127.0.0.1:1/hooks/two' }],
    ['other data', { ...request, data: target('0002') }],
  ] as const) {
    await assert.rejects(
      placeOrder(deps, other),
      (error: unknown) =>
        error instanceof PlaceOrderInputError &&
        error.code === 'IDEMPOTENCY_CONFLICT' &&
        /shop-7 already names an order with another product or data/.test(error.message),
      what,
    );
  }
  const upstream = (await sim.allOrders()).filter((o) => o.partner_ref === 'shop-7');
  assert.equal(upstream.length, 1);
  assert.equal((await store.queries.listEvents('shop-7')).length, 1, 'nothing more was sent or written');
});

test('a partner_ref of 64 emoji (64 characters, 128 UTF-16 units) is placed end to end and stored', async (t) => {
  const { sim, store, deps } = await setup(t);
  const partnerRef = '😀'.repeat(64);
  const result = await placeOrder(deps, { productCode: 'MLBB-86', data: target(), partnerRef });
  assert.equal(result.outcome, 'accepted');
  assert.equal((await store.queries.getOrder(partnerRef))?.invoiceNumber, result.order.invoiceNumber);
  const upstream = (await sim.allOrders()).filter((o) => o.partner_ref === partnerRef);
  assert.equal(upstream.length, 1);
});

test('a partner_ref of 65 characters is refused with one message by placement, the client, the store and the simulator', async (t) => {
  const { sim, store, deps } = await setup(t);
  const partnerRef = `${'😀'.repeat(64)}x`;
  const input = { product_code: 'MLBB-86', partner_ref: partnerRef, data: target() };
  const messages: string[] = [];
  await assert.rejects(
    placeOrder(deps, { productCode: 'MLBB-86', data: target(), partnerRef }),
    (error: unknown) => error instanceof PlaceOrderInputError && Boolean(messages.push(error.message)),
  );
  await assert.rejects(
    deps.client.createOrder(input),
    (error: unknown) =>
      error instanceof OrderInputError &&
      error.code === 'PARTNER_REF_TOO_LONG' &&
      Boolean(messages.push(error.message)),
  );
  await assert.rejects(
    () => store.writer.createLocalOrder({ partnerRef, data: target() }),
    (error: unknown) =>
      error instanceof StoreError &&
      error.code === 'INVALID_PARTNER_REF' &&
      Boolean(messages.push(error.message)),
  );
  const answer = await sim.api('/orders', { method: 'POST', json: input });
  assert.equal(answer.status, 400);
  assert.equal(answer.body.message, 'VALIDATION_ERROR');
  messages.push(answer.body.error);

  assert.equal(messages.length, 4);
  assert.deepEqual(new Set(messages), new Set([messages[0]]), messages.join('\n'));
  assert.match(messages[0]!, /^partner_ref\b.*64 characters.*got 65/);
  assert.equal((await store.queries.listOrders()).length, 0);
  assert.equal((await sim.allOrders()).length, 0);
});

test('a 400 marks the order rejected with the upstream code, and it is never retried', async (t) => {
  const { sim, deps } = await setup(t);
  await sim.patchMember('M-0001', { balance: 100 });
  const result = await placeOrder(deps, { productCode: 'MLBB-86', data: target(), partnerRef: 'poor-1' });
  assert.equal(result.outcome, 'rejected');
  assert.equal(result.outcome === 'rejected' && result.code, 'INSUFFICIENT_BALANCE');
  assert.match(result.outcome === 'rejected' ? result.fix : '', /top up/);
  assert.equal(result.order.submissionState, 'rejected');
  assert.equal(result.order.status, null);

  await sim.patchMember('M-0001', { balance: 1_000_000 });
  const again = await placeOrder(deps, { productCode: 'MLBB-86', data: target(), partnerRef: 'poor-1' });
  assert.equal(
    again.outcome,
    'rejected',
    'a rejected partner_ref stays rejected: a new order needs a new ref',
  );
  assert.equal((await sim.allOrders()).length, 0);
});

test('a 401 is our configuration, not the order: the order is blocked, never rejected, with the fix; once the key works the same partner_ref is placed once', async (t) => {
  const { sim, store, deps } = await setup(t);
  const before = await sim.balance();
  await sim.patchMember('M-0001', { h2h_enabled: false });

  const blocked = await placeOrder(deps, { productCode: 'MLBB-86', data: target(), partnerRef: 'key-1' });

  assert.equal(blocked.outcome, 'blocked');
  assert.equal(blocked.outcome === 'blocked' && blocked.code, 'INVALID_API_KEY');
  assert.match(blocked.outcome === 'blocked' ? blocked.fix : '', /H2H_API_KEY/);
  assert.equal(blocked.order.submissionState, 'blocked');
  assert.equal(blocked.order.nextPollAt !== null, true, 'the reconciler submits it again once a probe works');
  assert.equal((await store.queries.listOrders({ status: 'rejected' })).length, 0);

  await sim.patchMember('M-0001', { h2h_enabled: true });
  const placed = await placeOrder(deps, { productCode: 'MLBB-86', data: target(), partnerRef: 'key-1' });
  assert.equal(placed.outcome, 'accepted', 'the shop can use its reference again');
  assert.equal((await sim.allOrders()).filter((o) => o.partner_ref === 'key-1').length, 1);
  assert.equal(before - (await sim.balance()), 19_500);
});

test('an IP missing from the whitelist blocks the order too, and the fix names the IP to add', async (t) => {
  const { sim, deps } = await setup(t);
  const remote = new UpstreamClient({ baseUrl: sim.sim.baseUrl, apiKey: sim.keyOf('M-0002') });
  t.after(() => remote.close());

  const result = await placeOrder(
    { ...deps, client: remote },
    { productCode: 'MLBB-86', data: target(), partnerRef: 'ip-1' },
  );

  assert.equal(result.outcome, 'blocked');
  assert.equal(result.outcome === 'blocked' && result.code, 'IP_NOT_WHITELISTED');
  assert.equal(result.outcome === 'blocked' && result.fix, "add 127.0.0.1 to the member's whitelist");
});

test('a create answer that never comes leaves the order unknown, never failed, and the retry adopts the one upstream order', async (t) => {
  // undici checks header timeouts on a coarse (about 0.5 to 1 s) timer, hence the long delay.
  const { sim, deps } = await setup(t, { headersTimeoutMs: 200 });
  await sim.setFaults({ create_response_delay_ms: 2500 });
  const result = await placeOrder(deps, { productCode: 'MLBB-86', data: target(), partnerRef: 'slow-1' });
  assert.equal(result.outcome, 'unknown');
  assert.equal(result.order.submissionState, 'unknown');
  assert.equal(result.order.status, null);
  assert.ok(result.order.nextPollAt !== null, 'the reconciler is told to look at it');

  await sim.setFaults({ create_response_delay_ms: 0 });
  const retried = await placeOrder(deps, { productCode: 'MLBB-86', data: target(), partnerRef: 'slow-1' });
  assert.equal(retried.outcome, 'accepted');
  assert.equal((await sim.allOrders()).filter((o) => o.partner_ref === 'slow-1').length, 1);
});

test('100 orders under dropped answers, 5xx and late answers exist exactly once upstream and are debited once', async (t) => {
  const { sim, store, deps } = await setup(t, { headersTimeoutMs: 200 });
  await sim.patchMember('M-0001', { balance: 5_000_000 });
  const before = await sim.balance();
  const refs = Array.from({ length: 100 }, (_, i) => `fault-${String(i).padStart(3, '0')}`);
  const placeAll = async () => {
    const results: PlaceOrderResult[] = [];
    for (let i = 0; i < refs.length; i += 10) {
      const batch = refs.slice(i, i + 10);
      results.push(
        ...(await Promise.all(
          batch.map((ref) => placeOrder(deps, { productCode: 'MLBB-86', data: target(), partnerRef: ref })),
        )),
      );
    }
    return results;
  };

  await sim.setFaults({ create_drop_response: 0.4, error_5xx: 0.3 });
  const faulty = await placeAll();
  // Every refused or lost answer was either retried into the one order or left unknown; none failed.
  const outcomes = faulty.map((r) =>
    r.outcome === 'rejected' ? `rejected ${r.code} ${r.detail}` : r.outcome,
  );
  assert.deepEqual(
    outcomes.filter((o) => o !== 'accepted' && o !== 'unknown'),
    [],
  );
  assert.ok(faulty.some((r) => r.outcome === 'accepted'));

  await sim.setFaults({ create_drop_response: 0, error_5xx: 0, create_response_delay_ms: 2500 });
  await Promise.all(
    refs
      .slice(0, 5)
      .map((ref) => placeOrder(deps, { productCode: 'MLBB-86', data: target(), partnerRef: ref })),
  );

  // Resolve what is left with the same partner_refs, as the reconciler will.
  await sim.setFaults({ create_response_delay_ms: 0 });
  const settled = await placeAll();
  assert.deepEqual(new Set(settled.map((r) => r.outcome)), new Set(['accepted']));

  const upstream = (await sim.allOrders()).filter((o) => refs.includes(o.partner_ref));
  assert.equal(upstream.length, 100);
  assert.equal(new Set(upstream.map((o) => o.partner_ref)).size, 100);
  assert.equal(before - (await sim.balance()), 100 * 19_500);
  for (const order of upstream) {
    assert.equal((await store.queries.getOrder(order.partner_ref))?.invoiceNumber, order.invoice_number);
  }
});
