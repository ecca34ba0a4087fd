import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DEMO_MEMBERS, fixtureProduct, orderInput, startSimulator } from '../helpers/simulator.js';

describe('partner_ref idempotency', () => {
  test('repeating a POST with a used partner_ref answers 200 with the existing order and debits nothing more', async (t) => {
    const { createOrder, balance, member } = await startSimulator(t);
    const input = orderInput();

    const first = await createOrder(input);
    const again = await createOrder(input);

    assert.equal(first.status, 201);
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, first.body);
    assert.equal(await balance(), member.balance - first.body.amount);
  });

  test('a repeat with a different product and target still returns the existing order unchanged', async (t) => {
    const { createOrder, balance, member } = await startSimulator(t);
    const first = await createOrder({ product_code: 'MLBB-86' });

    const again = await createOrder({
      partner_ref: first.body.partner_ref,
      product_code: 'GI-330',
      data: { user_id: '1234560007', server_id: 'os_euro' },
    });

    assert.equal(again.status, 200);
    assert.deepEqual(again.body, first.body);
    assert.equal(await balance(), member.balance - first.body.amount);
  });

  test('a repeat returns the order with its current status, not the one at creation', async (t) => {
    const { createOrder, setStatus } = await startSimulator(t);
    const first = await createOrder();
    await setStatus(first.body.partner_ref, { status: 'PROCESSING' });

    const again = await createOrder({ partner_ref: first.body.partner_ref });

    assert.equal(again.status, 200);
    assert.equal(again.body.invoice_number, first.body.invoice_number);
    assert.equal(again.body.status, 'PROCESSING');
  });

  test('50 parallel POSTs with one partner_ref create one order and one debit', async (t) => {
    const { createOrder, balance, member, allOrders } = await startSimulator(t);
    const input = orderInput();

    const answers = await Promise.all(Array.from({ length: 50 }, () => createOrder(input)));

    const statuses = answers.map((a) => a.status).sort();
    assert.deepEqual(statuses, [...Array(49).fill(200), 201]);
    assert.equal(new Set(answers.map((a) => a.body.invoice_number)).size, 1);
    const orders = await allOrders();
    assert.deepEqual(
      orders.filter((o) => o.partner_ref === input.partner_ref).map((o) => o.create_requests),
      [50],
      'one order, named by 50 creates',
    );
    assert.equal(await balance(), member.balance - answers[0]!.body.amount);
  });

  test('50 parallel POSTs with distinct partner_refs create 50 orders and 50 debits', async (t) => {
    const { createOrder, balance, member, fixture, allOrders } = await startSimulator(t);
    const price = fixtureProduct(fixture, 'MLBB-86').role_prices.reseller!;

    const answers = await Promise.all(Array.from({ length: 50 }, () => createOrder()));

    assert.ok(answers.every((a) => a.status === 201));
    assert.equal(new Set(answers.map((a) => a.body.invoice_number)).size, 50);
    assert.equal((await allOrders()).length, 50);
    assert.equal(await balance(), member.balance - 50 * price);
  });

  test('parallel orders never overdraw: with balance for 3, exactly 3 of 10 succeed', async (t) => {
    const { createOrder, balance, keyOf, fixture, patchMember } = await startSimulator(t);
    const price = fixtureProduct(fixture, 'MLBB-86').role_prices.reseller!;
    await patchMember(DEMO_MEMBERS.lowBalance, { balance: 3 * price + 1 });
    const key = keyOf(DEMO_MEMBERS.lowBalance);

    const answers = await Promise.all(Array.from({ length: 10 }, () => createOrder({}, { key })));

    assert.equal(answers.filter((a) => a.status === 201).length, 3);
    assert.equal(answers.filter((a) => a.body.message === 'INSUFFICIENT_BALANCE').length, 7);
    assert.equal(await balance(key), 1);
  });

  test('a partner_ref refused for insufficient balance can be used again after a top-up', async (t) => {
    const { createOrder, keyOf, fixture, patchMember } = await startSimulator(t);
    const key = keyOf(DEMO_MEMBERS.lowBalance);
    const input = orderInput();
    const refused = await createOrder(input, { key });
    await patchMember(DEMO_MEMBERS.lowBalance, {
      balance: fixtureProduct(fixture, 'MLBB-86').role_prices.reseller!,
    });

    const retried = await createOrder(input, { key });

    assert.equal(refused.status, 400);
    assert.equal(retried.status, 201);
    assert.equal(retried.body.partner_ref, input.partner_ref);
  });
});
