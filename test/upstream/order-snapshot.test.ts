import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readOrderSnapshot } from '../../src/upstream/order-snapshot.js';

test('an order object is read tolerantly: a missing, empty or wrongly typed field reads as null', () => {
  const read = readOrderSnapshot({
    status: 'ON_HOLD',
    partner_ref: 'R1',
    invoice_number: '',
    amount: Number.NaN,
    target: 42,
    nickname: 'PlayerOne',
    extra: 'ignored',
  });

  assert.deepEqual(read, {
    ok: true,
    snapshot: {
      status: 'ON_HOLD',
      partner_ref: 'R1',
      invoice_number: null,
      amount: null,
      target: null,
      product_name: null,
      product_code: null,
      serial_number: null,
      nickname: 'PlayerOne',
      message: null,
      created_at: null,
      success_at: null,
    },
  });
});

test('only what can never apply is refused, with the reason: not an object, no status, no reference', () => {
  assert.deepEqual(readOrderSnapshot(null), { ok: false, problem: 'the order snapshot is not an object' });
  assert.deepEqual(readOrderSnapshot({ partner_ref: 'R1', status: '' }), {
    ok: false,
    problem: 'the order snapshot has no status',
  });
  assert.deepEqual(readOrderSnapshot({ status: 'PENDING', partner_ref: '', invoice_number: null }), {
    ok: false,
    problem: 'the order snapshot names neither partner_ref nor invoice_number',
  });
  assert.equal(readOrderSnapshot({ status: 'PENDING', invoice_number: 'INV-1' }).ok, true);
});
