// decisions.md, "Errors on create": a rejection is final only when no earlier attempt of the order
// could have reached the upstream. After an unanswered attempt (a time-out, a reset, a 5xx) any
// later 4xx leaves the outcome unknown, and the order is read by its partner_ref.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { test } from 'node:test';
import { type PlaceOrderResult, placeOrder, sendClaimedOrder } from '../../src/orders/place-order.js';
import { pollOrderNow } from '../../src/reconciler/early-poll.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { type Script, scriptedUpstream } from '../helpers/scripted-upstream.js';
import { startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { tempStore } from '../helpers/store.js';

const data = () => ({ user_id: userIdEndingIn('0007'), server_id: '2001' });

/**
 * A store, the simulator behind a scripted upstream, and a client that gives up on an answer
 * after 300 ms: `plan(ref, n)` says what the n-th create of `ref` gets (reads are forwarded).
 */
async function setup(t: TestContext, plan: (ref: string, n: number) => Script) {
  const sim = await startSimulator(t);
  const creates = new Map<string, number>();
  const upstream = await scriptedUpstream(t, sim.sim.origin, (received) => {
    if (received.method !== 'POST') return 'forward';
    const ref = (JSON.parse(received.body) as { partner_ref: string }).partner_ref;
    const n = (creates.get(ref) ?? 0) + 1;
    creates.set(ref, n);
    return plan(ref, n);
  });
  const { store } = await tempStore(t, { now: Date.now });
  const client = new UpstreamClient({
    baseUrl: upstream.baseUrl,
    apiKey: sim.member.api_key,
    headersTimeoutMs: 300,
    retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 20 },
  });
  t.after(() => client.close());
  const deps = { client, store };
  const reconciler = { store, client, settings: { passSize: 10 } };
  const feedTypes = async (ref: string) =>
    (await store.feed.after(0, 1000))
      .filter((e) => (e.data as { partner_ref?: string }).partner_ref === ref)
      .map((e) => e.type);
  return { sim, store, deps, reconciler, creates, feedTypes };
}

const refusal = (status: number, message: string): Script => ({
  status,
  body: { statusCode: status, message, error: 'refused' },
});

const unknown = (result: PlaceOrderResult) => {
  assert.equal(result.outcome, 'unknown', JSON.stringify(result));
  return result as Extract<PlaceOrderResult, { outcome: 'unknown' }>;
};

for (const [status, code] of [
  [400, 'INSUFFICIENT_BALANCE'],
  [409, 'CONFLICT'],
  [408, 'REQUEST_TIMEOUT'],
  [413, 'PAYLOAD_TOO_LARGE'],
] as const) {
  test(`a ${status} ${code} after a create that got no answer is no rejection: the order stays unknown, and the read finds the order that create made`, async (t) => {
    const { sim, store, deps, reconciler, feedTypes } = await setup(t, (_ref, n) =>
      n === 1 ? 'forward-unanswered' : refusal(status, code),
    );
    const result = unknown(
      await placeOrder(deps, { productCode: 'MLBB-86', data: data(), partnerRef: 'R-1' }),
    );
    assert.equal(result.cause, 'refused_in_doubt');
    assert.equal(result.code, code);
    const order = await store.queries.getOrder('R-1');
    assert.equal(order?.submissionState, 'unknown');
    assert.ok(order?.createInDoubtAt !== null, 'the create stays in doubt');
    const history = await store.queries.listEvents('R-1');
    assert.deepEqual(history.at(-1)?.payload, {
      state: 'unknown',
      inDoubt: true,
      refusal: { code, detail: 'refused' },
    });

    const read = await pollOrderNow(reconciler, 'R-1');
    assert.equal(read.kind, 'polled');
    const upstream = (await sim.allOrders()).filter((o) => o.partner_ref === 'R-1');
    assert.equal(upstream.length, 1, 'the first create made the order');
    const adopted = await store.queries.getOrder('R-1');
    assert.equal(adopted?.submissionState, 'accepted');
    assert.equal(adopted?.invoiceNumber, upstream[0]!.invoice_number);
    assert.deepEqual(await feedTypes('R-1'), ['order.updated', 'order.submitted'], 'never order.rejected');
  });
}

test('a 400 after a 5xx to the create is no rejection either: the 5xx may have come after the order was made', async (t) => {
  const { store, deps } = await setup(t, (_ref, n) =>
    n === 1 ? refusal(502, 'BAD_GATEWAY') : refusal(400, 'INSUFFICIENT_BALANCE'),
  );
  const result = unknown(await placeOrder(deps, { productCode: 'MLBB-86', data: data(), partnerRef: 'R-5' }));
  assert.equal(result.cause, 'refused_in_doubt');
  assert.equal((await store.queries.getOrder('R-5'))?.submissionState, 'unknown');
});

test('a 400 to the first attempt of a create is a rejection, final and never read again', async (t) => {
  const { store, deps, feedTypes } = await setup(t, () => refusal(400, 'INSUFFICIENT_BALANCE'));
  const result = await placeOrder(deps, { productCode: 'MLBB-86', data: data(), partnerRef: 'R-2' });
  assert.equal(result.outcome, 'rejected');
  const order = await store.queries.getOrder('R-2');
  assert.deepEqual(
    [order?.submissionState, order?.rejectionCode, order?.nextPollAt],
    ['rejected', 'INSUFFICIENT_BALANCE', null],
  );
  assert.equal(order?.createInDoubtAt, null);
  assert.deepEqual(await feedTypes('R-2'), ['order.rejected']);
});

test("the reconciler's repeated create after a 404 is no rejection when its own first attempt got no answer; the next 404 read makes the next refusal final", async (t) => {
  // Creates 1 and 2 (placement) and 3 (the first repeat) get no answer and never reach the
  // simulator; 4 (the first repeat's retry) and 5 (the second repeat) are refused.
  const { store, deps, reconciler, creates, feedTypes } = await setup(t, (_ref, n) =>
    n <= 3 ? 'unanswered' : refusal(400, 'INSUFFICIENT_BALANCE'),
  );
  assert.equal(
    unknown(await placeOrder(deps, { productCode: 'MLBB-86', data: data(), partnerRef: 'R-3' })).cause,
    'no_answer',
  );

  const first = await pollOrderNow(reconciler, 'R-3');
  assert.equal(first.kind, 'polled');
  assert.equal(creates.get('R-3'), 4, 'the 404 read was followed by a repeated create, sent twice');
  let order = await store.queries.getOrder('R-3');
  assert.equal(order?.submissionState, 'unknown', 'its first attempt may have made the order');

  await pollOrderNow(reconciler, 'R-3');
  assert.equal(creates.get('R-3'), 5);
  order = await store.queries.getOrder('R-3');
  assert.deepEqual([order?.submissionState, order?.rejectionCode], ['rejected', 'INSUFFICIENT_BALANCE']);
  assert.deepEqual(await feedTypes('R-3'), ['order.updated', 'order.rejected']);
});

test('a 2xx the store could not record leaves the create in doubt: a later 400 to the same ref is no rejection', async (t) => {
  // The first create is answered 201 with a body the store refuses (no status): the order may
  // well exist upstream. The second is refused.
  const { store, deps } = await setup(t, (ref, n) =>
    n === 1 ? { status: 201, body: { partner_ref: ref } } : refusal(400, 'INVALID_PRODUCT'),
  );
  const first = unknown(await placeOrder(deps, { productCode: 'MLBB-86', data: data(), partnerRef: 'R-7' }));
  assert.equal(first.code, 'INVALID_SNAPSHOT');
  assert.ok((await store.queries.getOrder('R-7'))?.createInDoubtAt !== null);
  const again = unknown(await placeOrder(deps, { productCode: 'MLBB-86', data: data(), partnerRef: 'R-7' }));
  assert.equal(again.cause, 'refused_in_doubt');
  assert.equal((await store.queries.getOrder('R-7'))?.submissionState, 'unknown');
});

test('a create marked sent by a sender that died leaves the next sender’s 400 no rejection', async (t) => {
  const { store, deps } = await setup(t, () => refusal(400, 'INSUFFICIENT_BALANCE'));
  await store.writer.createLocalOrder({
    partnerRef: 'R-4',
    productCode: 'MLBB-86',
    data: data(),
    queued: true,
  });
  // The first sender claims it and marks its create sent, then dies before any answer.
  const dead = (await store.claims.claimNextQueued())!;
  assert.ok(
    await store.writer.startSubmission('R-4', dead.claim, { leaseMs: store.claims.settings.leaseMs }),
  );
  await store.claims.releaseClaim('R-4', dead.claim);

  const next = (await store.claims.claimNextQueued())!;
  assert.equal(next.partnerRef, 'R-4');
  const result = unknown(await sendClaimedOrder(deps, next));
  assert.equal(result.cause, 'refused_in_doubt');
  assert.equal((await store.queries.getOrder('R-4'))?.submissionState, 'unknown');
});

test('the client reports an attempt that may have reached the upstream, and not one whose connection was refused', async (t) => {
  const sim = await startSimulator(t);
  const hung = await scriptedUpstream(t, sim.sim.origin, () => 'unanswered');
  const refused = await scriptedUpstream(t, sim.sim.origin, () => 'forward');
  const closedUrl = refused.baseUrl.replace(/:\d+\//, ':1/');
  const unanswered = async (baseUrl: string) => {
    const client = new UpstreamClient({
      baseUrl,
      apiKey: sim.member.api_key,
      headersTimeoutMs: 300,
      retry: { maxAttempts: 1 },
    });
    t.after(() => client.close());
    let reported = 0;
    await assert.rejects(
      client.createOrder(
        { product_code: 'MLBB-86', partner_ref: 'R-6', data: data() },
        { onUnanswered: () => reported++ },
      ),
    );
    return reported;
  };
  assert.equal(await unanswered(hung.baseUrl), 1, 'no answer in time: it may have been made');
  assert.equal(await unanswered(closedUrl), 0, 'refused connection: nothing was sent');
});
