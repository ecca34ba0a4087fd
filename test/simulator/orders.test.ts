import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Order, OrderInput } from '../../src/upstream/model.js';
import {
  DEMO_MEMBERS,
  fixtureMember,
  fixtureProduct,
  startSimulator,
  uniqueRef,
  userIdEndingIn,
} from '../helpers/simulator.js';

const ORDER_FIELDS = [
  'amount',
  'created_at',
  'invoice_number',
  'message',
  'nickname',
  'partner_ref',
  'product_code',
  'product_name',
  'serial_number',
  'status',
  'success_at',
  'target',
].sort();

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;

function assertFreshPendingOrder(order: Order, expected: Partial<Order>): void {
  assert.deepEqual(Object.keys(order).sort(), ORDER_FIELDS);
  assert.equal(order.status, 'PENDING');
  assert.equal(order.serial_number, null);
  assert.equal(order.success_at, null);
  assert.equal(order.message, null);
  assert.equal(typeof order.invoice_number, 'string');
  assert.ok(order.invoice_number.length > 0);
  assert.match(order.created_at, ISO_UTC);
  assert.ok(Math.abs(Date.parse(order.created_at) - Date.now()) < 60_000, 'created_at is now');
  assert.equal(typeof order.nickname, 'string');
  assert.ok((order.nickname ?? '').length > 0, 'nickname resolved');
  for (const [key, value] of Object.entries(expected)) {
    assert.deepEqual(order[key as keyof Order], value, key);
  }
}

describe('POST /orders', () => {
  test('an order by product_code answers 201 PENDING with the reseller price, and debits it once', async (t) => {
    const { createOrder, balance, fixture, member } = await startSimulator(t);
    const product = fixtureProduct(fixture, 'MLBB-86');
    const userId = userIdEndingIn('0007');

    const answer = await createOrder({
      product_code: 'MLBB-86',
      partner_ref: 'code-1',
      data: { user_id: userId, server_id: '2001' },
    });

    assert.equal(answer.status, 201);
    assertFreshPendingOrder(answer.body, {
      partner_ref: 'code-1',
      amount: product.role_prices.reseller!,
      target: `${userId}(2001)`,
      product_name: product.name,
      product_code: 'MLBB-86',
    });
    assert.equal(await balance(), member.balance - product.role_prices.reseller!);
  });

  test('an order by product_id orders the same product as its code', async (t) => {
    const { createOrder, fixture } = await startSimulator(t);
    const product = fixtureProduct(fixture, 'MLBB-172');

    const answer = await createOrder({ product_code: undefined, product_id: product.id });

    assert.equal(answer.status, 201);
    assert.equal(answer.body.product_code, 'MLBB-172');
    assert.equal(answer.body.product_name, product.name);
    assert.equal(answer.body.amount, product.role_prices.reseller);
  });

  test('a member of role "member" is charged the base price', async (t) => {
    const { createOrder, fixture, keyOf, balance } = await startSimulator(t);
    const product = fixtureProduct(fixture, 'MLBB-86');
    const second = fixtureMember(fixture, DEMO_MEMBERS.memberRole);

    const answer = await createOrder({}, { key: second.api_key });

    assert.equal(answer.status, 201);
    assert.equal(answer.body.amount, product.price);
    assert.equal(await balance(keyOf(DEMO_MEMBERS.memberRole)), second.balance - product.price);
  });

  test('a product with a region server id builds the target as user_id(server_id)', async (t) => {
    const { createOrder } = await startSimulator(t);
    const userId = userIdEndingIn('0007', 10);

    const answer = await createOrder({
      product_code: 'GI-60',
      data: { user_id: userId, server_id: 'os_asia' },
    });

    assert.equal(answer.status, 201);
    assert.equal(answer.body.target, `${userId}(os_asia)`);
  });

  test('a product with only a user id uses the user id alone as the target', async (t) => {
    const { createOrder } = await startSimulator(t);
    const userId = userIdEndingIn('0007', 10);

    const answer = await createOrder({ product_code: 'FF-70', data: { user_id: userId } });

    assert.equal(answer.status, 201);
    assert.equal(answer.body.target, userId);
  });

  test('two orders get distinct invoice numbers and two debits', async (t) => {
    const { createOrder, balance, member } = await startSimulator(t);

    const first = await createOrder();
    const second = await createOrder();

    assert.equal(first.status, 201);
    assert.equal(second.status, 201);
    assert.notEqual(first.body.invoice_number, second.body.invoice_number);
    assert.equal(await balance(), member.balance - first.body.amount - second.body.amount);
  });

  test('orders without partner_ref are not deduplicated: each creates an order', async (t) => {
    const { api, balance, member } = await startSimulator(t);
    const input = { product_code: 'MLBB-86', data: { user_id: userIdEndingIn('0007'), server_id: '2001' } };

    const first = await api<Order>('/orders', { method: 'POST', json: input });
    const second = await api<Order>('/orders', { method: 'POST', json: input });

    assert.equal(first.status, 201);
    assert.equal(second.status, 201);
    assert.notEqual(first.body.invoice_number, second.body.invoice_number);
    assert.equal(await balance(), member.balance - 2 * first.body.amount);
  });

  test('a balance exactly equal to the price is enough, and leaves 0', async (t) => {
    const { createOrder, balance, keyOf, fixture, patchMember } = await startSimulator(t);
    const price = fixtureProduct(fixture, 'MLBB-86').role_prices.reseller!;
    await patchMember(DEMO_MEMBERS.lowBalance, { balance: price });
    const key = keyOf(DEMO_MEMBERS.lowBalance);

    const answer = await createOrder({}, { key });

    assert.equal(answer.status, 201);
    assert.equal(await balance(key), 0);
  });
});

describe('POST /orders refusals', () => {
  test('INSUFFICIENT_BALANCE: 400, no order, no debit', async (t) => {
    const { createOrder, getOrder, balance, keyOf, fixture } = await startSimulator(t);
    const key = keyOf(DEMO_MEMBERS.lowBalance);
    const before = fixtureMember(fixture, DEMO_MEMBERS.lowBalance).balance;

    const answer = await createOrder({ partner_ref: 'poor-1' }, { key });

    assert.equal(answer.status, 400);
    assert.equal(answer.body.statusCode, 400);
    assert.equal(answer.body.message, 'INSUFFICIENT_BALANCE');
    assert.equal(typeof answer.body.error, 'string');
    assert.equal(await balance(key), before);
    assert.equal((await getOrder('poor-1', { key })).status, 404);
  });

  test('INVALID_PRODUCT for an unknown code, an unknown id, an inactive product, an API-disabled product and a product of an inactive category', async (t) => {
    const { createOrder, balance, member, allOrders } = await startSimulator(t);
    const game = { user_id: userIdEndingIn('0007'), server_id: '2001' };
    const cases: Array<[string, Partial<OrderInput>]> = [
      ['unknown code', { product_code: 'NOPE-1', data: game }],
      [
        'unknown id',
        { product_code: undefined, product_id: '00000000-0000-4000-8000-000000000000', data: game },
      ],
      ['inactive product', { product_code: 'MLBB-2195', data: game }],
      ['API disabled', { product_code: 'PUBGM-325', data: { user_id: userIdEndingIn('0007') } }],
      ['inactive category', { product_code: 'VAL-475', data: { user_id: 'Player#1234' } }],
    ];

    for (const [name, overrides] of cases) {
      const answer = await createOrder(overrides);
      assert.equal(answer.status, 400, name);
      assert.equal(answer.body.message, 'INVALID_PRODUCT', name);
      assert.equal(answer.body.statusCode, 400, name);
    }
    assert.equal(await balance(), member.balance);
    assert.equal((await allOrders()).length, 0);
  });

  test('INVALID_TARGET names the field whose value does not match the product', async (t) => {
    const { createOrder } = await startSimulator(t);
    const cases: Array<[string, string, Record<string, string>, string]> = [
      ['user id with letters', 'MLBB-86', { user_id: 'abc12345', server_id: '2001' }, 'user_id'],
      ['user id too short', 'MLBB-86', { user_id: '12345', server_id: '2001' }, 'user_id'],
      [
        'server id too long',
        'MLBB-86',
        { user_id: userIdEndingIn('0007'), server_id: '123456' },
        'server_id',
      ],
      ['missing server id', 'MLBB-86', { user_id: userIdEndingIn('0007') }, 'server_id'],
      ['unknown region', 'GI-60', { user_id: userIdEndingIn('0007', 10), server_id: 'os_mars' }, 'server_id'],
      ['FF user id too short', 'FF-70', { user_id: '1234567' }, 'user_id'],
    ];

    for (const [name, product_code, data, field] of cases) {
      const answer = await createOrder({ product_code, data });
      assert.equal(answer.status, 400, name);
      assert.equal(answer.body.message, 'INVALID_TARGET', name);
      assert.match(String(answer.body.error), new RegExp(field), `${name}: error names ${field}`);
    }
  });

  test('a user id ending in 0000 is refused at creation with INVALID_TARGET, no order and no debit', async (t) => {
    const { createOrder, getOrder, balance, member } = await startSimulator(t);

    const answer = await createOrder({
      partner_ref: 'zero-suffix',
      data: { user_id: userIdEndingIn('0000'), server_id: '2001' },
    });

    assert.equal(answer.status, 400);
    assert.equal(answer.body.message, 'INVALID_TARGET');
    assert.match(String(answer.body.error), /user_id/);
    assert.equal(await balance(), member.balance);
    assert.equal((await getOrder('zero-suffix')).status, 404);
  });

  test('VALIDATION_ERROR names the malformed field, and nothing is debited', async (t) => {
    const { api, balance, member, allOrders } = await startSimulator(t);
    const data = { user_id: userIdEndingIn('0007'), server_id: '2001' };
    const cases: Array<[string, unknown, string]> = [
      ['neither product_code nor product_id', { partner_ref: uniqueRef(), data }, 'product_(code|id)'],
      ['no data', { product_code: 'MLBB-86', partner_ref: uniqueRef() }, 'data'],
      ['data not an object', { product_code: 'MLBB-86', partner_ref: uniqueRef(), data: 'x' }, 'data'],
      [
        'partner_ref of 65 characters',
        { product_code: 'MLBB-86', partner_ref: 'r'.repeat(65), data },
        'partner_ref',
      ],
      ['partner_ref a number', { product_code: 'MLBB-86', partner_ref: 42, data }, 'partner_ref'],
      ['product_code a number', { product_code: 86, partner_ref: uniqueRef(), data }, 'product_code'],
      ['product_id a number', { product_id: 86, partner_ref: uniqueRef(), data }, 'product_id'],
      [
        'callback_url a number',
        { product_code: 'MLBB-86', partner_ref: uniqueRef(), data, callback_url: 5 },
        'callback_url',
      ],
    ];

    for (const [name, body, field] of cases) {
      const answer = await api('/orders', { method: 'POST', json: body });
      assert.equal(answer.status, 400, name);
      assert.deepEqual(Object.keys(answer.body).sort(), ['error', 'message', 'statusCode'], name);
      assert.equal(answer.body.message, 'VALIDATION_ERROR', name);
      assert.match(String(answer.body.error), new RegExp(field), `${name}: error names ${field}`);
    }
    assert.equal(await balance(), member.balance);
    assert.equal((await allOrders()).length, 0);
  });

  test('a body that is not JSON answers 400 VALIDATION_ERROR in the spec error shape', async (t) => {
    const { api } = await startSimulator(t);

    const answer = await api('/orders', {
      method: 'POST',
      rawBody: '{"product_code": "MLBB-86",',
      headers: { 'content-type': 'application/json' },
    });

    assert.equal(answer.status, 400);
    assert.deepEqual(Object.keys(answer.body).sort(), ['error', 'message', 'statusCode']);
    assert.equal(answer.body.message, 'VALIDATION_ERROR');
  });

  test('a partner_ref of exactly 64 characters is accepted', async (t) => {
    const { createOrder } = await startSimulator(t);
    const ref = 'x'.repeat(64);

    const answer = await createOrder({ partner_ref: ref });

    assert.equal(answer.status, 201);
    assert.equal(answer.body.partner_ref, ref);
  });
});

describe('GET /orders/:ref', () => {
  test('finds an order by partner_ref and by invoice_number, both equal to the creation answer', async (t) => {
    const { createOrder, getOrder } = await startSimulator(t);
    const created = (await createOrder()).body;

    const byRef = await getOrder(created.partner_ref);
    const byInvoice = await getOrder(created.invoice_number);

    assert.equal(byRef.status, 200);
    assert.equal(byInvoice.status, 200);
    assert.deepEqual(byRef.body, created);
    assert.deepEqual(byInvoice.body, created);
  });

  test('refs with a slash, a space and non-ASCII characters round-trip URL-encoded', async (t) => {
    const { createOrder, getOrder } = await startSimulator(t);

    for (const ref of ['a/b c', 'pesanan-ü-日本-#1?x=1', '100%_sure&more']) {
      const created = await createOrder({ partner_ref: ref });
      assert.equal(created.status, 201, ref);
      assert.equal(created.body.partner_ref, ref);
      const found = await getOrder(ref);
      assert.equal(found.status, 200, ref);
      assert.deepEqual(found.body, created.body, ref);
    }
  });

  test('a partner_ref of 64 four-byte characters is accepted and found again', async (t) => {
    const { createOrder, getOrder } = await startSimulator(t);
    const ref = '😀'.repeat(64);

    const created = await createOrder({ partner_ref: ref });
    const found = await getOrder(ref);

    assert.equal(created.status, 201, created.text);
    assert.equal(found.status, 200, found.text);
    assert.equal(found.body.partner_ref, ref);
  });

  test('an unknown ref answers 404 ORDER_NOT_FOUND', async (t) => {
    const { getOrder } = await startSimulator(t);

    const answer = await getOrder('never-created');

    assert.equal(answer.status, 404);
    assert.deepEqual(answer.body, { statusCode: 404, message: 'ORDER_NOT_FOUND', error: 'Not Found' });
  });

  test("one member cannot read another member's order", async (t) => {
    const { createOrder, getOrder, keyOf } = await startSimulator(t);
    const created = (await createOrder()).body;

    const byRef = await getOrder(created.partner_ref, { key: keyOf(DEMO_MEMBERS.memberRole) });
    const byInvoice = await getOrder(created.invoice_number, { key: keyOf(DEMO_MEMBERS.memberRole) });

    assert.equal(byRef.status, 404);
    assert.equal(byInvoice.status, 404);
  });
});
