// docs/api.md, "Idempotency": the same partner_ref and the same body answer the same order in
// every state, compared with the request as the shop sent it, never with what the upstream filled
// in later; the Idempotency-Key header names the partner_ref too.
import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import { request } from 'undici';
import { buildApiApp } from '../../src/api/app.js';
import type { PublicOrder } from '../../src/domain/public-order.js';
import type { ClaimingStore } from '../../src/store/order-store.js';
import { defaultApiLimits } from '../helpers/api.js';
import { snapshot, tempStore } from '../helpers/store.js';

const PRODUCT = { code: 'MLBB-86', id: '6f1c0c3e-0000-4000-8000-000000000086' };
const DATA = { user_id: '12345678', server_id: '2001' };

async function startApi(t: TestContext) {
  const { store } = await tempStore(t, { now: Date.now });
  const app = await buildApiApp({ store, ...defaultApiLimits() });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.after(() => app.close());
  const origin = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  const token = (await store.tokens.create('till', ['orders:write', 'orders:read'])).token;
  const post = async (body: unknown, headers: Record<string, string> = {}) => {
    const answer = await request(`${origin}/v1/orders`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    // biome-ignore lint/suspicious/noExplicitAny: answers of many shapes
    return { status: answer.statusCode, headers: answer.headers, body: (await answer.body.json()) as any };
  };
  const get = async (ref: string) => {
    const answer = await request(`${origin}/v1/orders/${ref}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    return (await answer.body.json()) as PublicOrder;
  };
  return { store, post, get };
}

/**
 * Moves a queued order on as the submission pump and the upstream would: claimed, its create
 * marked sent, then answered with the upstream's order (which fills in product_code, product_id
 * and product_name, whatever the shop sent), or refused.
 */
async function moveTo(
  store: ClaimingStore,
  ref: string,
  state: 'queued' | 'accepted' | 'final' | 'rejected' | 'cancelled',
) {
  if (state === 'queued') return;
  if (state === 'cancelled') {
    assert.equal(
      (await store.writer.cancelOrder(ref, { code: 'CANCELLED', detail: 'test' })).cancelled,
      true,
    );
    return;
  }
  const claimed = (await store.claims.claimOrder(ref))!;
  assert.ok(claimed.claimed);
  assert.ok(
    await store.writer.startSubmission(ref, claimed.order.claim, {
      leaseMs: store.claims.settings.leaseMs,
    }),
  );
  if (state === 'rejected') {
    await store.writer.markRejected(ref, 'INVALID_TARGET', 'user_id');
    return;
  }
  const filled = { product_code: PRODUCT.code, product_id: PRODUCT.id, created_at: new Date().toISOString() };
  await store.writer.applyOrderSnapshot(snapshot(ref, 'PENDING', filled), { source: 'create' });
  if (state === 'final') {
    await store.writer.applyOrderSnapshot(snapshot(ref, 'SUCCESS', { ...filled, serial_number: 'SN-1' }), {
      source: 'webhook',
      eventId: `e-${ref}`,
    });
  }
}

const BODIES = {
  'product_code only': { product_code: PRODUCT.code, data: DATA },
  'product_id only': { product_id: PRODUCT.id, data: DATA },
  'product_code and product_id': { product_code: PRODUCT.code, product_id: PRODUCT.id, data: DATA },
} as const;
const STATES = ['queued', 'accepted', 'final', 'rejected', 'cancelled'] as const;

test('the same body posted again answers 200 with the same order in every state, whether it named the product by code, by id or both; another body 409', async (t) => {
  const { store, post, get } = await startApi(t);
  for (const [named, body] of Object.entries(BODIES)) {
    for (const state of STATES) {
      const ref = `${named.replace(/ /g, '-')}-${state}`;
      assert.equal((await post({ ...body, partner_ref: ref })).status, 202);
      await moveTo(store, ref, state);

      // The same fields in another order, the data's keys too: the same request.
      const again = await post({
        partner_ref: ref,
        ...body,
        data: { server_id: DATA.server_id, user_id: DATA.user_id },
      });
      assert.equal(again.status, 200, `${named}, ${state}: ${JSON.stringify(again.body)}`);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.deepEqual(again.body, await get(ref), `${named}, ${state}: the order as it is now`);

      for (const other of [
        { ...body, data: { ...DATA, user_id: '87654321' } },
        { ...body, data: { ...DATA, zone: 'x' } },
        ...Object.values(BODIES).filter((b) => b !== body),
      ]) {
        const conflict = await post({ ...other, partner_ref: ref });
        assert.equal(conflict.status, 409, `${named}, ${state}: ${JSON.stringify(other)}`);
        assert.equal(conflict.body.error.code, 'IDEMPOTENCY_CONFLICT');
      }
    }
  }
});

test('Idempotency-Key names the partner_ref when the body has none: the same body twice with one key is one order', async (t) => {
  const { store, post } = await startApi(t);
  const body = BODIES['product_code only'];
  const first = await post(body, { 'idempotency-key': 'shop-key-1' });
  const second = await post(body, { 'idempotency-key': 'shop-key-1' });
  assert.equal(first.status, 202);
  assert.equal(first.body.partner_ref, 'shop-key-1');
  assert.equal(second.status, 200);
  assert.equal(second.headers['idempotent-replayed'], 'true');
  assert.equal((await store.queries.listOrders()).length, 1, 'one order, one submission');

  assert.equal(
    (await post({ ...body, partner_ref: 'shop-key-1' }, { 'idempotency-key': 'shop-key-1' })).status,
    200,
  );
  const differ = await post({ ...body, partner_ref: 'shop-key-2' }, { 'idempotency-key': 'shop-key-1' });
  assert.equal(differ.status, 400);
  assert.equal(differ.body.error.code, 'VALIDATION_ERROR');
  assert.match(differ.body.error.message, /Idempotency-Key and partner_ref differ/);
  const tooLong = await post(body, { 'idempotency-key': 'k'.repeat(65) });
  assert.equal(tooLong.status, 400);
  assert.match(tooLong.body.error.message, /^Idempotency-Key: /);
  assert.equal((await store.queries.listOrders()).length, 1, 'nothing stored for a refused key');
});

test('a data value that is not a string is refused with 400 naming the field, before a digit can be lost', async (t) => {
  const { store, post } = await startApi(t);
  for (const [value, shown] of [
    ['12345678901234567890', 'number'],
    ['true', 'boolean'],
    ['null', 'null'],
    ['{"a":"b"}', 'object'],
  ] as const) {
    const refused = await post(`{"product_code":"MLBB-86","partner_ref":"num","data":{"user_id":${value}}}`);
    assert.equal(refused.status, 400, value);
    assert.equal(refused.body.error.code, 'VALIDATION_ERROR');
    assert.match(refused.body.error.message, new RegExp(`^data\\.user_id must be a string, got ${shown}`));
  }
  assert.equal(await store.queries.getOrder('num'), undefined, 'nothing stored');
  assert.equal((await post({ ...BODIES['product_code only'], partner_ref: 'num' })).status, 202);
});

test('the order says in one field whether it is done: outcome is null while open, then how it ended', async (t) => {
  const { store, post, get } = await startApi(t);
  const outcome = async (ref: string) => (await get(ref)).outcome;
  for (const ref of ['queued', 'open', 'delivered', 'failed', 'refunded', 'rejected', 'cancelled']) {
    await post({ ...BODIES['product_code only'], partner_ref: ref });
  }
  assert.equal(await outcome('queued'), null);
  await moveTo(store, 'open', 'accepted');
  assert.equal(await outcome('open'), null, 'PENDING');
  await moveTo(store, 'delivered', 'final');
  assert.equal(await outcome('delivered'), 'delivered');
  await moveTo(store, 'failed', 'accepted');
  await store.writer.applyOrderSnapshot(snapshot('failed', 'FAILED'), { source: 'poll' });
  assert.equal(await outcome('failed'), 'failed');
  await moveTo(store, 'refunded', 'final');
  await store.writer.applyOrderSnapshot(snapshot('refunded', 'REFUNDED'), { source: 'poll' });
  assert.equal(await outcome('refunded'), 'refunded', 'a delivered order can be refunded later');
  await moveTo(store, 'rejected', 'rejected');
  assert.equal(await outcome('rejected'), 'rejected');
  await moveTo(store, 'cancelled', 'cancelled');
  assert.equal(await outcome('cancelled'), 'cancelled');
});
