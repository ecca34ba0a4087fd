import assert from 'node:assert/strict';
import { test } from 'node:test';
import { accountingOf, ledgerEntry, lowBalanceChange } from '../../src/domain/balance-rules.js';
import type { SubmissionState } from '../../src/store/local-order.js';

const order = (submission_state: SubmissionState, status: string | null) => ({
  submission_state,
  status,
  amount: 15_000,
  product_code: 'ML86',
  product_id: null,
});

test('a write is debited when the upstream first accepts the order and credited when it first fails or is refunded', () => {
  const table: Array<[ReturnType<typeof order> | null, ReturnType<typeof order>, boolean, boolean]> = [
    [null, order('pending', null), false, false],
    [null, order('accepted', 'PENDING'), true, false],
    [order('pending', null), order('accepted', 'PROCESSING'), true, false],
    [order('accepted', 'PROCESSING'), order('accepted', 'SUCCESS'), false, false],
    [order('accepted', 'PROCESSING'), order('accepted', 'FAILED'), false, true],
    [order('accepted', 'SUCCESS'), order('accepted', 'REFUNDED'), false, true],
    [order('accepted', 'FAILED'), order('accepted', 'FAILED'), false, false],
    [null, order('accepted', 'FAILED'), true, true],
    [order('pending', null), order('rejected', null), false, false],
  ];
  for (const [current, next, accepted, credited] of table) {
    const label = `${current?.submission_state}/${current?.status} → ${next.submission_state}/${next.status}`;
    assert.deepEqual(accountingOf(current, next), { accepted, credited }, label);
  }
});

test('an accepted order without a known price is counted as unpriced, not debited', () => {
  assert.deepEqual(ledgerEntry({ accepted: true, credited: false }, null, null), {
    debit: 0,
    credit: 0,
    unpriced: 1,
  });
  assert.deepEqual(ledgerEntry({ accepted: true, credited: true }, 900, null), {
    debit: 900,
    credit: 900,
    unpriced: 0,
  });
});

test('a credit is exactly what was debited: not the price now, nothing for an order accepted unpriced', () => {
  assert.deepEqual(ledgerEntry({ accepted: false, credited: true }, null, 700), {
    debit: 0,
    credit: 700,
    unpriced: 0,
  });
  assert.deepEqual(ledgerEntry({ accepted: false, credited: true }, 900, null), {
    debit: 0,
    credit: 0,
    unpriced: 0,
  });
  assert.deepEqual(ledgerEntry({ accepted: true, credited: true }, null, null), {
    debit: 0,
    credit: 0,
    unpriced: 1,
  });
});

test('balance.low is due once per crossing under the threshold, and never with a threshold of 0', () => {
  assert.equal(lowBalanceChange(99, 100, false), 'alert');
  assert.equal(lowBalanceChange(50, 100, true), null);
  assert.equal(lowBalanceChange(100, 100, true), 'clear');
  assert.equal(lowBalanceChange(150, 100, false), null);
  assert.equal(lowBalanceChange(-5, 0, false), null);
});
