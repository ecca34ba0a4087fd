import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CLOCK_SKEW_TOLERANCE_MS, otherOrderReason } from '../../src/orders/ref-reuse.js';
import { startSubmissionPump } from '../../src/orders/submission-pump.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { tempStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';

const SENT = Date.UTC(2026, 10, 28, 12);
const ours = {
  data: { user_id: '12345678', server_id: '2001' },
  productName: 'ML 86',
  firstSentAt: SENT,
  neverSent: false,
};
const answer = {
  target: '12345678(2001)',
  product_name: 'ML 86',
  created_at: new Date(SENT + 1000).toISOString(),
};

test('an answer is another order when its target, product name or creation time says so, and only then', () => {
  assert.equal(otherOrderReason(ours, answer), null);
  assert.match(
    otherOrderReason(ours, { ...answer, target: '12345678(2002)' })!,
    /^its target is 12345678\(2002\), ours 12345678\(2001\)$/,
  );
  assert.match(otherOrderReason(ours, { ...answer, target: '123456789(2001)' })!, /target/);
  assert.equal(
    otherOrderReason(ours, { ...answer, target: ' 12345678 (2001) PlayerOne' }),
    null,
    'a nickname after it',
  );
  assert.match(otherOrderReason(ours, { ...answer, target: '12345678(20019)' })!, /target/);
  assert.equal(otherOrderReason(ours, { ...answer, target: null }), null, 'nothing to compare');
  assert.equal(
    otherOrderReason({ ...ours, data: { phone: '0812' } }, { ...answer, target: 'anything' }),
    null,
  );
  assert.equal(
    otherOrderReason({ ...ours, data: { user_id: '12345678' } }, { ...answer, target: '12345678' }),
    null,
    'no server id: the user id alone',
  );
  assert.match(
    otherOrderReason(ours, { ...answer, product_name: 'FF 70' })!,
    /^its product is FF 70, ours ML 86$/,
  );
  assert.equal(otherOrderReason(ours, { ...answer, product_name: 'ml  86' }), null);
  assert.equal(otherOrderReason({ ...ours, productName: null }, { ...answer, product_name: 'FF 70' }), null);
  const created = (ms: number) => ({ ...answer, created_at: new Date(ms).toISOString() });
  assert.equal(otherOrderReason(ours, created(SENT - CLOCK_SKEW_TOLERANCE_MS)), null, 'within the skew');
  assert.match(
    otherOrderReason(ours, created(SENT - CLOCK_SKEW_TOLERANCE_MS - 1))!,
    /before our first create/,
  );
  assert.equal(
    otherOrderReason(ours, { ...answer, created_at: '2026-11-28T11:56:00' }),
    null,
    'an upstream time without an offset is UTC',
  );
  assert.match(otherOrderReason({ ...ours, neverSent: true }, answer)!, /never sent/);
});

test('the shop’s order under a ref the upstream already has for another order is rejected PARTNER_REF_REUSED, never placed, and the other order is left alone', async (t) => {
  const sim = await startSimulator(t);
  const { store } = await tempStore(t, { now: Date.now });
  const client = new UpstreamClient({ baseUrl: sim.sim.baseUrl, apiKey: sim.member.api_key });
  t.after(() => client.close());
  // A shop whose refs restart at order-1: the upstream has an order-1 from before.
  const old = await sim.createOrder({
    partner_ref: 'order-1',
    product_code: 'FF-70',
    data: { user_id: '99990001' },
  });
  assert.equal(old.status, 201);
  const balance = await sim.balance();

  await store.writer.createLocalOrder({
    partnerRef: 'order-1',
    productCode: 'MLBB-86',
    data: { user_id: userIdEndingIn('0007'), server_id: '2001' },
    queued: true,
  });
  const pump = startSubmissionPump({ store, client, idleMs: 20 });
  t.after(() => pump.stop());
  await waitFor(async () => (await store.queries.getOrder('order-1'))?.submissionState === 'rejected', {
    message: 'the pump to send order-1',
  });

  const order = (await store.queries.getPublicOrder('order-1'))!;
  assert.equal(order.rejection?.code, 'PARTNER_REF_REUSED');
  assert.equal(order.outcome, 'rejected');
  assert.deepEqual([order.invoice_number, order.product_code, order.status], [null, 'MLBB-86', null]);
  assert.deepEqual(
    (await store.feed.after(0, 100)).map((e) => e.type),
    ['order.rejected'],
    'the shop hears a rejection, never the old order’s status',
  );
  assert.equal((await sim.allOrders()).length, 1);
  assert.equal(await sim.balance(), balance, 'no second debit');
  assert.deepEqual(pump.sent, { accepted: 0, rejected: 1, blocked: 0, unknown: 0 });
});
