import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { request } from 'undici';
import { startDemoShop } from '../../src/demo/demo-shop.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';

/** A notification of order `ref` at `version`, signed by the reference library (never by our code). */
function signed(secret: string, id: string, ref: string, version: number) {
  const body = JSON.stringify({
    type: 'order.updated',
    timestamp: new Date().toISOString(),
    data: { partner_ref: ref, status: version > 1 ? 'SUCCESS' : 'PENDING', version },
  });
  // One instant for the signature and the header: read twice, they could fall on two seconds.
  const at = new Date();
  const signature = new Webhook(secret).sign(id, at, body);
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': signature,
    },
  };
}

test('the demo shop accepts only notifications that verify, and keeps the highest version of each order once', async (t) => {
  const shop = await startDemoShop();
  t.after(() => shop.close());
  const secret = generateEndpointSecret();
  shop.trust(secret);
  const post = async (notification: { body: string; headers: Record<string, string> }) =>
    (await request(shop.url, { method: 'POST', ...notification })).statusCode;

  assert.equal(await post(signed(secret, 'evt_2', 'ref-1', 2)), 204);
  assert.equal(await post(signed(secret, 'evt_2', 'ref-1', 2)), 204, 'a duplicate is answered 2xx');
  assert.equal(await post(signed(secret, 'evt_1', 'ref-1', 1)), 204, 'an older version is answered 2xx');
  assert.equal(await post(signed(generateEndpointSecret(), 'evt_3', 'ref-1', 3)), 401);
  const tampered = signed(secret, 'evt_4', 'ref-1', 4);
  assert.equal(await post({ ...tampered, body: tampered.body.replace('SUCCESS', 'FAILED') }), 401);

  assert.equal(shop.orders.get('ref-1')?.version, 2);
  assert.deepEqual(shop.counts, { received: 5, verified: 3, rejected: 2, duplicates: 1, outOfDate: 1 });
});
