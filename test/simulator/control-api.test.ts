import assert from 'node:assert/strict';
import { networkInterfaces } from 'node:os';
import { describe, test } from 'node:test';
import type { Order } from '../../src/upstream/model.js';
import {
  DEMO_MEMBERS,
  fixtureMember,
  fixtureProduct,
  httpRequest,
  orderInput,
  startSimulator,
  type TestSimulator,
  userIdEndingIn,
} from '../helpers/simulator.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';

const NO_FAULTS = {
  webhook_drop: 0,
  webhook_drop_final: 0,
  webhook_duplicate: 0,
  webhook_bad_signature: 0,
  webhook_stale_timestamp: 0,
  webhook_reorder: 0,
  webhook_delay_ms: 0,
  create_response_delay_ms: 0,
  create_drop_response: 0,
  error_5xx: 0,
  nickname_validator_down: false,
  order_read_errors: [],
  order_not_found_body: null,
};

interface StatusChange {
  status: string;
  serial_number?: string;
  message?: string;
}

function moveOrder(harness: TestSimulator, ref: string, change: StatusChange) {
  return harness.control<Order & { statusCode?: number; error?: string }>(
    `/orders/${encodeURIComponent(ref)}/status`,
    { method: 'POST', json: change },
  );
}

/** A parked (0007) order moved through `path` by the control API; fails when a step is refused. */
async function orderAt(harness: TestSimulator, path: StatusChange[]): Promise<Order> {
  const created = await harness.createOrder();
  assert.equal(created.status, 201);
  for (const step of path) {
    const moved = await moveOrder(harness, created.body.partner_ref, step);
    assert.equal(moved.status, 200, `setting up ${JSON.stringify(step)}: ${moved.text}`);
  }
  return (await harness.getOrder(created.body.partner_ref)).body;
}

const SUCCESS_WITH_SERIAL = { status: 'SUCCESS', serial_number: 'SN-1' };

describe('POST /__sim/orders/:ref/status', () => {
  const allowed: Array<[string, StatusChange[], StatusChange]> = [
    ['PENDING → PROCESSING', [], { status: 'PROCESSING' }],
    ['PENDING → SUCCESS', [], SUCCESS_WITH_SERIAL],
    ['PENDING → FAILED', [], { status: 'FAILED' }],
    ['PROCESSING → SUCCESS', [{ status: 'PROCESSING' }], SUCCESS_WITH_SERIAL],
    ['PROCESSING → FAILED', [{ status: 'PROCESSING' }], { status: 'FAILED' }],
    ['SUCCESS → REFUNDED', [SUCCESS_WITH_SERIAL], { status: 'REFUNDED' }],
    [
      'SUCCESS → SUCCESS adding a serial',
      [{ status: 'SUCCESS' }],
      { status: 'SUCCESS', serial_number: 'SN-2' },
    ],
  ];
  for (const [name, path, change] of allowed) {
    test(`${name} is allowed: 200 with the order as GET then shows it`, async (t) => {
      const harness = await startSimulator(t);
      const before = await orderAt(harness, path);

      const moved = await moveOrder(harness, before.partner_ref, change);

      assert.equal(moved.status, 200, moved.text);
      assert.equal(moved.body.status, change.status);
      if (change.serial_number) assert.equal(moved.body.serial_number, change.serial_number);
      assert.deepEqual(moved.body, (await harness.getOrder(before.partner_ref)).body);
    });
  }

  const forbidden: Array<[string, StatusChange[], StatusChange]> = [
    ['PENDING → REFUNDED', [], { status: 'REFUNDED' }],
    ['PENDING → PENDING', [], { status: 'PENDING' }],
    ['PROCESSING → PENDING', [{ status: 'PROCESSING' }], { status: 'PENDING' }],
    ['SUCCESS → FAILED', [SUCCESS_WITH_SERIAL], { status: 'FAILED' }],
    ['SUCCESS → PROCESSING', [SUCCESS_WITH_SERIAL], { status: 'PROCESSING' }],
    [
      'SUCCESS → SUCCESS with a serial already set',
      [SUCCESS_WITH_SERIAL],
      { status: 'SUCCESS', serial_number: 'SN-9' },
    ],
    ['FAILED → SUCCESS', [{ status: 'FAILED' }], SUCCESS_WITH_SERIAL],
    ['REFUNDED → SUCCESS', [SUCCESS_WITH_SERIAL, { status: 'REFUNDED' }], SUCCESS_WITH_SERIAL],
    ['PENDING → a status outside the table', [], { status: 'DELIVERED' }],
  ];
  for (const [name, path, change] of forbidden) {
    test(`${name} is refused with 409 TRANSITION_NOT_ALLOWED and changes nothing`, async (t) => {
      const harness = await startSimulator(t);
      const before = await orderAt(harness, path);
      const balanceBefore = await harness.balance();

      const refused = await moveOrder(harness, before.partner_ref, change);

      assert.equal(refused.status, 409, refused.text);
      assert.equal(refused.body.statusCode, 409);
      assert.equal(refused.body.message, 'TRANSITION_NOT_ALLOWED');
      assert.equal(typeof refused.body.error, 'string');
      assert.deepEqual((await harness.getOrder(before.partner_ref)).body, before);
      assert.equal(await harness.balance(), balanceBefore);
    });
  }

  test('FAILED and REFUNDED credit the amount back; SUCCESS sets success_at and keeps the debit', async (t) => {
    const harness = await startSimulator(t);
    const initial = harness.member.balance;

    const failed = await orderAt(harness, [{ status: 'FAILED', message: 'no stock' }]);
    assert.equal(failed.message, 'no stock');
    assert.equal(await harness.balance(), initial);

    const succeeded = await orderAt(harness, [SUCCESS_WITH_SERIAL]);
    assert.notEqual(succeeded.success_at, null);
    assert.equal(await harness.balance(), initial - succeeded.amount);

    const refunded = await moveOrder(harness, succeeded.partner_ref, { status: 'REFUNDED' });
    assert.equal(refunded.body.status, 'REFUNDED');
    assert.equal(typeof refunded.body.message, 'string');
    assert.equal(await harness.balance(), initial);
  });

  test('a status change through the control API sends a signed webhook', async (t) => {
    const sink = await startWebhookSink(t, { secrets: ['sim_secret_demo_M0001'] });
    const harness = await startSimulator(t, { webhookUrl: sink.url });
    const created = await harness.createOrder();

    await moveOrder(harness, created.body.partner_ref, { status: 'PROCESSING' });
    const [delivery] = await sink.waitForDeliveries(
      (d) => d.body?.data?.partner_ref === created.body.partner_ref,
    );

    assert.equal(delivery?.body?.data?.status, 'PROCESSING');
    assert.equal(delivery?.signatureValid, true);
  });

  test('the order can be named by its invoice number', async (t) => {
    const harness = await startSimulator(t);
    const created = await harness.createOrder();

    const moved = await moveOrder(harness, created.body.invoice_number, { status: 'PROCESSING' });

    assert.equal(moved.status, 200);
    assert.equal((await harness.getOrder(created.body.partner_ref)).body.status, 'PROCESSING');
  });

  test('an unknown ref answers 404 ORDER_NOT_FOUND', async (t) => {
    const harness = await startSimulator(t);

    const answer = await moveOrder(harness, 'never-created', { status: 'PROCESSING' });

    assert.equal(answer.status, 404);
    assert.equal(answer.body.message, 'ORDER_NOT_FOUND');
  });

  test('a body without status answers 400 VALIDATION_ERROR naming status', async (t) => {
    const harness = await startSimulator(t);
    const created = await harness.createOrder();

    const answer = await harness.control(`/orders/${created.body.partner_ref}/status`, {
      method: 'POST',
      json: { serial_number: 'SN-1' },
    });

    assert.equal(answer.status, 400);
    assert.equal(answer.body.message, 'VALIDATION_ERROR');
    assert.match(answer.body.error, /status/);
  });
});

describe('GET /__sim/orders', () => {
  test('lists every order of every member with member_id, product_id, data, callback_url and the creates that named it', async (t) => {
    const harness = await startSimulator(t);
    const data = { user_id: userIdEndingIn('0007'), server_id: '2001' };
    const first = await harness.createOrder({ data, callback_url: 'http://127.0.0.1:9/hook' });
    const second = await harness.createOrder({}, { key: harness.keyOf(DEMO_MEMBERS.memberRole) });
    await harness.createOrder({ partner_ref: first.body.partner_ref, data });
    await harness.createOrder({ partner_ref: first.body.partner_ref, product_code: 'GI-330' });

    const answer = await harness.control('/orders');

    assert.equal(answer.status, 200);
    const byRef = new Map(
      (answer.body as Array<Order & Record<string, unknown>>).map((o) => [o.partner_ref, o]),
    );
    assert.equal(byRef.size, 2);
    assert.deepEqual(byRef.get(first.body.partner_ref), {
      ...first.body,
      member_id: DEMO_MEMBERS.reseller,
      product_id: fixtureProduct(harness.fixture, 'MLBB-86').id,
      data,
      callback_url: 'http://127.0.0.1:9/hook',
      create_requests: 3,
    });
    assert.equal(byRef.get(second.body.partner_ref)?.member_id, DEMO_MEMBERS.memberRole);
    assert.equal(byRef.get(second.body.partner_ref)?.callback_url, null);
    assert.equal(byRef.get(second.body.partner_ref)?.create_requests, 1);
  });
});

describe('PATCH /__sim/members/:member_id', () => {
  test('balance sets the member balance that GET /profile shows', async (t) => {
    const harness = await startSimulator(t);

    const patched = await harness.control(`/members/${DEMO_MEMBERS.reseller}`, {
      method: 'PATCH',
      json: { balance: 1234 },
    });

    assert.equal(patched.status, 200);
    assert.equal(await harness.balance(), 1234);
  });

  test('ip_whitelist with loopback lets the remote-only member in; without it, it is refused again', async (t) => {
    const harness = await startSimulator(t);
    const key = harness.keyOf(DEMO_MEMBERS.remote);

    await harness.control(`/members/${DEMO_MEMBERS.remote}`, {
      method: 'PATCH',
      json: { ip_whitelist: ['127.0.0.1'] },
    });
    const admitted = await harness.api('/profile', { key });
    await harness.control(`/members/${DEMO_MEMBERS.reseller}`, {
      method: 'PATCH',
      json: { ip_whitelist: ['203.0.113.10'] },
    });
    const excluded = await harness.api('/profile');

    assert.equal(admitted.status, 200);
    assert.equal(admitted.body.member_id, DEMO_MEMBERS.remote);
    assert.equal(excluded.status, 401);
    assert.deepEqual(excluded.body, { statusCode: 401, message: 'IP_NOT_WHITELISTED', error: '127.0.0.1' });
  });

  test('h2h_enabled and active switch a member on and off', async (t) => {
    const harness = await startSimulator(t);

    await harness.control(`/members/${DEMO_MEMBERS.noH2h}`, { method: 'PATCH', json: { h2h_enabled: true } });
    await harness.control(`/members/${DEMO_MEMBERS.inactive}`, { method: 'PATCH', json: { active: true } });
    await harness.control(`/members/${DEMO_MEMBERS.reseller}`, {
      method: 'PATCH',
      json: { h2h_enabled: false },
    });
    await harness.control(`/members/${DEMO_MEMBERS.memberRole}`, {
      method: 'PATCH',
      json: { active: false },
    });

    const statuses = await Promise.all(
      [DEMO_MEMBERS.noH2h, DEMO_MEMBERS.inactive, DEMO_MEMBERS.reseller, DEMO_MEMBERS.memberRole].map(
        async (id) => (await harness.api('/profile', { key: harness.keyOf(id) })).body.message ?? 'OK',
      ),
    );
    assert.deepEqual(statuses, ['OK', 'OK', 'INVALID_API_KEY', 'INVALID_API_KEY']);
  });

  test('webhook_url sends later events of the member to the new URL', async (t) => {
    const sink = await startWebhookSink(t, { secrets: ['sim_secret_demo_M0001'] });
    const harness = await startSimulator(t);

    const patched = await harness.control(`/members/${DEMO_MEMBERS.reseller}`, {
      method: 'PATCH',
      json: { webhook_url: sink.url },
    });
    const created = await harness.createOrder({
      data: { user_id: userIdEndingIn('4321'), server_id: '2001' },
    });
    const [delivery] = await sink.waitForDeliveries(
      (d) => d.body?.data?.partner_ref === created.body.partner_ref,
    );

    assert.equal(patched.status, 200);
    assert.equal(patched.body.webhook_url, sink.url);
    assert.equal(delivery?.signatureValid, true);
  });

  test('an unknown member answers 404', async (t) => {
    const harness = await startSimulator(t);

    const answer = await harness.control('/members/M-9999', { method: 'PATCH', json: { balance: 1 } });

    assert.equal(answer.status, 404);
    assert.equal(answer.body.statusCode, 404);
  });

  test('invalid values answer 400 VALIDATION_ERROR naming the field, and change nothing', async (t) => {
    const harness = await startSimulator(t);
    const cases: Array<[unknown, string]> = [
      [{ balance: -1 }, 'balance'],
      [{ balance: '100' }, 'balance'],
      [{ ip_whitelist: ['not-an-ip'] }, 'ip_whitelist'],
      [{ h2h_enabled: 'yes' }, 'h2h_enabled'],
      [{ webhook_url: 'not a url' }, 'webhook_url'],
      [{ balanse: 5 }, 'balanse'],
    ];

    for (const [body, field] of cases) {
      const answer = await harness.control(`/members/${DEMO_MEMBERS.reseller}`, {
        method: 'PATCH',
        json: body,
      });
      assert.equal(answer.status, 400, JSON.stringify(body));
      assert.equal(answer.body.message, 'VALIDATION_ERROR', JSON.stringify(body));
      assert.match(answer.body.error, new RegExp(field), JSON.stringify(body));
    }
    assert.equal(await harness.balance(), harness.member.balance);
  });
});

describe('GET and POST /__sim/faults', () => {
  test('all faults are off at start', async (t) => {
    const harness = await startSimulator(t);

    const answer = await harness.control('/faults');

    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body, NO_FAULTS);
  });

  test('POST merges a partial update into the current faults', async (t) => {
    const harness = await startSimulator(t);

    await harness.control('/faults', { method: 'POST', json: { webhook_drop: 0.25, webhook_delay_ms: 10 } });
    const merged = await harness.control('/faults', { method: 'POST', json: { error_5xx: 0.5 } });
    const current = await harness.control('/faults');

    const expected = { ...NO_FAULTS, webhook_drop: 0.25, webhook_delay_ms: 10, error_5xx: 0.5 };
    assert.equal(merged.status, 200);
    assert.deepEqual(merged.body, expected);
    assert.deepEqual(current.body, expected);
  });

  test('an invalid fault answers 400 VALIDATION_ERROR naming it, and changes nothing', async (t) => {
    const harness = await startSimulator(t);
    const cases: Array<[unknown, string]> = [
      [{ webhook_drop: 1.5 }, 'webhook_drop'],
      [{ error_5xx: -0.1 }, 'error_5xx'],
      [{ webhook_duplicate: 'often' }, 'webhook_duplicate'],
      [{ webhook_delay_ms: -5 }, 'webhook_delay_ms'],
      [{ nickname_validator_down: 1 }, 'nickname_validator_down'],
      [{ order_read_errors: 'ref-1' }, 'order_read_errors'],
      [{ order_read_errors: [''] }, 'order_read_errors'],
      [{ order_not_found_body: 404 }, 'order_not_found_body'],
      [{ webhook_explode: 1 }, 'webhook_explode'],
      [{ webhook_drop: 0.5, create_drop_response: 2 }, 'create_drop_response'],
    ];

    for (const [body, field] of cases) {
      const answer = await harness.control('/faults', { method: 'POST', json: body });
      assert.equal(answer.status, 400, JSON.stringify(body));
      assert.equal(answer.body.message, 'VALIDATION_ERROR', JSON.stringify(body));
      assert.match(answer.body.error, new RegExp(field), JSON.stringify(body));
    }
    assert.deepEqual((await harness.control('/faults')).body, NO_FAULTS);
  });

  test('the same seed draws the same faults for the same requests; another seed draws others', async (t) => {
    async function run(seed: number): Promise<string> {
      const harness = await startSimulator(t, { seed });
      await harness.control('/faults', { method: 'POST', json: { error_5xx: 0.5 } });
      let outcomes = '';
      for (let i = 0; i < 40; i++) outcomes += (await harness.api('/profile')).status === 503 ? 'x' : '.';
      return outcomes;
    }

    const first = await run(7);
    const again = await run(7);
    const other = await run(8);

    assert.match(first, /x/);
    assert.match(first, /\./);
    assert.equal(again, first);
    assert.notEqual(other, first);
  });
});

describe('POST /__sim/reset', () => {
  test('returns to the fixture: no orders, balances, members, faults, webhook log and rate windows as at start', async (t) => {
    const sink = await startWebhookSink(t, { secrets: ['sim_secret_demo_M0001'] });
    const harness = await startSimulator(t, { rateLimit: 4, webhookUrl: sink.url });
    const created = await harness.createOrder({
      data: { user_id: userIdEndingIn('4321'), server_id: '2001' },
    });
    await sink.waitForDeliveries((d) => d.body?.data?.partner_ref === created.body.partner_ref);
    await harness.control(`/members/${DEMO_MEMBERS.remote}`, {
      method: 'PATCH',
      json: { ip_whitelist: ['127.0.0.1'] },
    });
    await harness.control('/faults', { method: 'POST', json: { webhook_drop: 1 } });
    for (let i = 0; i < 3; i++) await harness.api('/categories');
    assert.equal((await harness.api('/profile')).status, 429, 'rate window full before the reset');

    const reset = await harness.control('/reset', { method: 'POST' });

    assert.equal(reset.status, 200);
    assert.deepEqual((await harness.control('/orders')).body, []);
    assert.deepEqual((await harness.control('/webhooks')).body, []);
    assert.deepEqual((await harness.control('/faults')).body, NO_FAULTS);
    assert.equal(await harness.balance(), harness.member.balance);
    assert.equal((await harness.getOrder(created.body.partner_ref)).status, 404);
    const remote = await harness.api('/profile', { key: harness.keyOf(DEMO_MEMBERS.remote) });
    assert.equal(remote.body.message, 'IP_NOT_WHITELISTED');
  });

  test('a partner_ref used before the reset creates a new order after it', async (t) => {
    const harness = await startSimulator(t);
    const input = orderInput();
    const before = await harness.createOrder(input);

    await harness.control('/reset', { method: 'POST' });
    const after = await harness.createOrder(input);

    assert.equal(after.status, 201);
    assert.notEqual(after.body.invoice_number, before.body.invoice_number);
  });

  test('orders in progress at the reset send no more webhooks', async (t) => {
    const sink = await startWebhookSink(t, { secrets: ['sim_secret_demo_M0001'] });
    const harness = await startSimulator(t, { webhookUrl: sink.url, timeScale: 0.05 });
    const old = await harness.createOrder({ data: { user_id: userIdEndingIn('0003'), server_id: '2001' } });

    await harness.control('/reset', { method: 'POST' });
    const fresh = await harness.createOrder({ data: { user_id: userIdEndingIn('0003'), server_id: '2001' } });
    await sink.waitForDeliveries((d) => d.body?.data?.partner_ref === fresh.body.partner_ref, 2);

    assert.equal(sink.forRef(old.body.partner_ref).length, 0);
  });
});

describe('control API access', () => {
  test('only loopback callers reach /__sim; a caller from another address gets 403 (and IP_NOT_WHITELISTED on the member API)', async (t) => {
    const external = Object.values(networkInterfaces())
      .flat()
      .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
    assert.ok(external, 'this test needs a non-loopback IPv4 interface on the machine');
    const harness = await startSimulator(t, { host: '0.0.0.0' });
    const port = new URL(harness.sim.origin).port;

    const control = await httpRequest(`http://${external}:${port}/__sim/orders`);
    const member = await httpRequest(`http://${external}:${port}/v1/member-api/profile`, {
      headers: { 'x-api-key': fixtureMember(harness.fixture, DEMO_MEMBERS.reseller).api_key },
    });
    const fromLoopback = await httpRequest(`http://127.0.0.1:${port}/__sim/orders`);

    assert.equal(control.status, 403);
    assert.equal(control.body.statusCode, 403);
    assert.deepEqual(member.body, { statusCode: 401, message: 'IP_NOT_WHITELISTED', error: external });
    assert.equal(fromLoopback.status, 200);
  });
});
