import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import Fastify from 'fastify';
import { request } from 'undici';
import { createSimulator, type Fixture } from '../../src/simulator/index.js';
import type { Order, Product, Profile } from '../../src/upstream/model.js';
import { waitFor } from '../helpers/wait.js';

const KEY = 'sim_key_demo_M0001';
const SECRET = 'sim_secret_demo_M0001';

interface Received {
  headers: Record<string, unknown>;
  rawBody: Buffer;
}

async function json<T>(url: string, init: { method?: 'GET' | 'POST'; body?: unknown } = {}) {
  const response = await request(url, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': KEY, ...(init.body ? { 'content-type': 'application/json' } : {}) },
    body: init.body ? JSON.stringify(init.body) : undefined,
  });
  return { status: response.statusCode, body: (await response.body.json()) as T };
}

test('smoke: profile, products, one order created and read back, and its webhook arrives signed', async (t) => {
  const received: Received[] = [];
  const receiver = Fastify();
  receiver.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) =>
    done(null, body),
  );
  receiver.post('/webhooks', async (req) => {
    received.push({ headers: req.headers, rawBody: req.body as Buffer });
    return { ok: true };
  });
  await receiver.listen({ host: '127.0.0.1', port: 0 });
  t.after(() => receiver.close());
  const address = receiver.server.address();
  assert.ok(address && typeof address === 'object');

  const fixture = JSON.parse(readFileSync('fixtures/demo.json', 'utf8')) as Fixture;
  const sim = await createSimulator({ fixture, port: 0, timeScale: 0.001 });
  t.after(() => sim.close());

  const profile = await json<Profile>(`${sim.baseUrl}/profile`);
  assert.equal(profile.status, 200);
  assert.deepEqual(profile.body, {
    member_id: 'M-0001',
    member_name: 'Demo Reseller',
    member_role: 'reseller',
    member_balance: 1_000_000,
  });

  const products = await json<Product[]>(`${sim.baseUrl}/products?category_code=MLBB`);
  assert.equal(products.status, 200);
  assert.ok(products.body.length > 0);
  assert.equal(products.body.find((p) => p.code === 'MLBB-86')?.price, 19_500);

  const created = await json<Order>(`${sim.baseUrl}/orders`, {
    method: 'POST',
    body: {
      product_code: 'MLBB-86',
      partner_ref: 'smoke/1 ü',
      data: { user_id: '12345678', server_id: '2001' },
      callback_url: `http://127.0.0.1:${address.port}/webhooks`,
    },
  });
  assert.equal(created.status, 201);
  assert.equal(created.body.status, 'PENDING');
  assert.equal(created.body.amount, 19_500);

  const read = await json<Order>(`${sim.baseUrl}/orders/${encodeURIComponent('smoke/1 ü')}`);
  assert.equal(read.status, 200);
  assert.equal(read.body.invoice_number, created.body.invoice_number);

  const [delivery] = await waitFor(() => (received.length > 0 ? received : undefined), {
    message: 'a webhook at the receiver',
  });
  assert.ok(delivery);
  const timestamp = String(delivery.headers['x-timestamp']);
  const expected = createHmac('sha256', SECRET)
    .update(Buffer.concat([Buffer.from(`${timestamp}.`), delivery.rawBody]))
    .digest('hex');
  assert.equal(delivery.headers['x-signature'], expected);
  assert.equal(delivery.headers['x-event-type'], 'order.updated');
  const event = JSON.parse(delivery.rawBody.toString('utf8')) as { event_id: string; data: Order };
  assert.equal(event.event_id, delivery.headers['x-event-id']);
  assert.equal(event.data.partner_ref, 'smoke/1 ü');
  assert.equal(event.data.status, 'SUCCESS');
  assert.match(event.data.serial_number ?? '', /^SN/);
});
