import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { orderInput, startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';

const MEMBER_ENDPOINTS: Array<{ method: 'GET' | 'POST'; path: string; json?: unknown }> = [
  { method: 'GET', path: '/profile' },
  { method: 'GET', path: '/categories' },
  { method: 'GET', path: '/products' },
  { method: 'POST', path: '/orders', json: orderInput() },
  { method: 'GET', path: '/orders/any-ref' },
];

describe('member API faults', () => {
  test('error_5xx 1: every member endpoint answers 503 in the spec error shape, and no order is created', async (t) => {
    const harness = await startSimulator(t);
    await harness.setFaults({ error_5xx: 1 });

    for (const endpoint of MEMBER_ENDPOINTS) {
      const answer = await harness.api(endpoint.path, { method: endpoint.method, json: endpoint.json });
      assert.equal(answer.status, 503, `${endpoint.method} ${endpoint.path}`);
      assert.deepEqual(Object.keys(answer.body).sort(), ['error', 'message', 'statusCode']);
      assert.equal(answer.body.statusCode, 503);
    }
    const orders = await harness.control('/orders');
    await harness.setFaults({ error_5xx: 0 });

    assert.equal(orders.status, 200, 'the control API is not affected');
    assert.deepEqual(orders.body, []);
    assert.equal(await harness.balance(), harness.member.balance);
  });

  test('create_response_delay_ms: the order is committed before the late answer arrives', async (t) => {
    const harness = await startSimulator(t);
    await harness.setFaults({ create_response_delay_ms: 600 });
    const input = orderInput();
    const started = Date.now();

    let answeredAt = 0;
    const pending = harness.createOrder(input).then((answer) => {
      answeredAt = Date.now();
      return answer;
    });
    const seen = await waitFor(async () => {
      const found = await harness.getOrder(input.partner_ref!);
      return found.status === 200 ? { order: found.body, at: Date.now() } : undefined;
    });
    const answer = await pending;

    assert.ok(seen.at < answeredAt, 'GET found the order before POST answered');
    assert.ok(answeredAt - started >= 590, `answered after ${answeredAt - started} ms`);
    assert.equal(answer.status, 201);
    assert.equal(answer.body.invoice_number, seen.order.invoice_number);
  });

  test('create_drop_response 1: the connection is cut, the order exists, and a repeat with the same partner_ref returns it without a second debit', async (t) => {
    const harness = await startSimulator(t);
    await harness.setFaults({ create_drop_response: 1 });
    const input = orderInput();

    await assert.rejects(harness.createOrder(input), 'the POST gets no answer');
    await harness.setFaults({ create_drop_response: 0 });
    const repeat = await harness.createOrder(input);
    const found = await harness.getOrder(input.partner_ref!);

    assert.equal(repeat.status, 200);
    assert.deepEqual(found.body, repeat.body);
    assert.equal(await harness.balance(), harness.member.balance - repeat.body.amount);
  });

  test('nickname_validator_down: orders still proceed with nickname null; back up, nicknames return', async (t) => {
    const sink = await startWebhookSink(t, { secrets: ['sim_secret_demo_M0001'] });
    const harness = await startSimulator(t, { webhookUrl: sink.url });
    await harness.setFaults({ nickname_validator_down: true });
    const data = { user_id: userIdEndingIn('4321'), server_id: '2001' };

    const down = await harness.createOrder({ data });
    const [delivered] = await sink.waitForDeliveries(
      (d) => d.body?.data?.partner_ref === down.body.partner_ref,
    );
    await harness.setFaults({ nickname_validator_down: false });
    const up = await harness.createOrder({ data });

    assert.equal(down.status, 201);
    assert.equal(down.body.nickname, null);
    assert.equal(delivered?.body?.data?.status, 'SUCCESS');
    assert.equal(delivered?.body?.data?.nickname, null);
    assert.equal(up.status, 201);
    assert.equal(typeof up.body.nickname, 'string');
  });

  test('order_read_errors: GET /orders/:ref of the listed orders answers 500, by partner_ref or invoice number; other orders answer as usual', async (t) => {
    const harness = await startSimulator(t);
    const failing = await harness.createOrder();
    const healthy = await harness.createOrder();
    await harness.setFaults({ order_read_errors: [failing.body.partner_ref] });

    const byRef = await harness.getOrder(failing.body.partner_ref);
    const byInvoice = await harness.getOrder(failing.body.invoice_number);
    const other = await harness.getOrder(healthy.body.partner_ref);
    await harness.setFaults({ order_read_errors: [] });
    const after = await harness.getOrder(failing.body.partner_ref);

    assert.deepEqual([byRef.status, byRef.body.message], [500, 'INTERNAL_ERROR']);
    assert.equal(byInvoice.status, 500);
    assert.equal(other.status, 200);
    assert.equal(after.status, 200);
  });

  test('order_not_found_body: a 404 of GET /orders/:ref carries the given body, JSON or not, instead of ORDER_NOT_FOUND', async (t) => {
    const harness = await startSimulator(t);
    const spec = await harness.getOrder('nobody-1');
    await harness.setFaults({ order_not_found_body: '<html><body>404 Not Found</body></html>' });
    const html = await harness.getOrder('nobody-1');
    await harness.setFaults({ order_not_found_body: '{"statusCode":404,"message":"Order not found"}' });
    const json = await harness.getOrder('nobody-1');
    const found = await harness.getOrder((await harness.createOrder()).body.partner_ref);

    assert.deepEqual([spec.status, spec.body.message], [404, 'ORDER_NOT_FOUND']);
    assert.equal(html.status, 404);
    assert.equal(html.text, '<html><body>404 Not Found</body></html>');
    assert.match(String(html.headers['content-type']), /^text\/plain/);
    assert.equal(json.status, 404);
    assert.deepEqual(json.body, { statusCode: 404, message: 'Order not found' });
    assert.match(String(json.headers['content-type']), /^application\/json/);
    assert.equal(found.status, 200, 'an order that exists is found as usual');
  });
});
