import assert from 'node:assert/strict';
import { test } from 'node:test';
import { orderRequestJson, type StoredRequest, sameOrderRequest } from '../../src/orders/order-request.js';

const DATA = { user_id: '12345678', server_id: '2001' };

/** An order as the store keeps it, placed by `request`; `filled` is what the upstream filled in later. */
function stored(request: StoredRequest['request'], filled: Partial<StoredRequest> = {}): StoredRequest {
  return {
    request,
    productCode: request?.product_code ?? null,
    productId: request?.product_id ?? null,
    data: request?.data ?? null,
    callbackUrl: request?.callback_url ?? null,
    ...filled,
  };
}

test('a request kept as sent is the same request field for field, whatever the order of its keys and what the upstream filled in', () => {
  const byId = stored({ product_id: 'P-86', data: DATA }, { productCode: 'MLBB-86' });
  assert.equal(
    sameOrderRequest(byId, { data: { server_id: '2001', user_id: '12345678' }, product_id: 'P-86' }),
    true,
  );
  assert.equal(sameOrderRequest(byId, { product_id: 'P-86', product_code: 'MLBB-86', data: DATA }), false);
  assert.equal(sameOrderRequest(byId, { product_code: 'MLBB-86', data: DATA }), false);
  assert.equal(sameOrderRequest(byId, { product_id: 'P-86', data: { ...DATA, zone: '1' } }), false);
  assert.equal(sameOrderRequest(byId, { product_id: 'P-86', data: DATA, callback_url: 'http://x/' }), false);
  const withCallback = stored({ product_code: 'MLBB-86', data: DATA, callback_url: 'http://x/' });
  assert.equal(
    sameOrderRequest(withCallback, { callback_url: 'http://x/', product_code: 'MLBB-86', data: DATA }),
    true,
  );
  assert.equal(sameOrderRequest(withCallback, { product_code: 'MLBB-86', data: DATA }), false);
  assert.equal(
    orderRequestJson({ data: { b: '2', a: '1' }, product_code: 'C' }),
    orderRequestJson({ product_code: 'C', data: { a: '1', b: '2' } }),
  );
});

test('an order written before requests were kept is compared on what it has: the product fields a repeat names, the data and the callback URL', () => {
  const legacy = stored(null, { productCode: 'MLBB-86', productId: 'P-86', data: DATA, callbackUrl: null });
  assert.equal(sameOrderRequest(legacy, { product_id: 'P-86', data: DATA }), true);
  assert.equal(sameOrderRequest(legacy, { product_code: 'MLBB-86', data: DATA }), true);
  assert.equal(sameOrderRequest(legacy, { product_code: 'MLBB-86', product_id: 'P-86', data: DATA }), true);
  assert.equal(sameOrderRequest(legacy, { product_code: 'FF-100', data: DATA }), false);
  assert.equal(sameOrderRequest(legacy, { product_id: 'P-86', data: { user_id: '1' } }), false);
  assert.equal(
    sameOrderRequest(legacy, { product_id: 'P-86', data: DATA, callback_url: 'http://x/' }),
    false,
  );
  assert.equal(
    sameOrderRequest(stored(null), { product_code: 'MLBB-86', data: DATA }),
    false,
    'placed elsewhere',
  );
});
