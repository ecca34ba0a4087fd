import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decideSnapshot, decideTransition, isFinalStatus } from '../../src/domain/state-machine.js';

const at = (status: string, serial_number: string | null = null) => ({ status, serial_number });

test('the allowed transitions of decisions.md move an order', () => {
  const allowed: Array<[string, string]> = [
    ['PENDING', 'PROCESSING'],
    ['PENDING', 'SUCCESS'],
    ['PENDING', 'FAILED'],
    ['PROCESSING', 'SUCCESS'],
    ['PROCESSING', 'FAILED'],
    ['SUCCESS', 'REFUNDED'],
  ];
  for (const [from, to] of allowed)
    assert.equal(decideTransition(at(from), at(to)).apply, true, `${from}→${to}`);
});

test('regressions and moves out of a final state never change an order', () => {
  const refused: Array<[string, string]> = [
    ['PROCESSING', 'PENDING'],
    ['SUCCESS', 'PENDING'],
    ['SUCCESS', 'PROCESSING'],
    ['SUCCESS', 'FAILED'],
    ['FAILED', 'PENDING'],
    ['FAILED', 'PROCESSING'],
    ['FAILED', 'SUCCESS'],
    ['FAILED', 'REFUNDED'],
    ['REFUNDED', 'PENDING'],
    ['REFUNDED', 'SUCCESS'],
    ['PENDING', 'REFUNDED'],
  ];
  for (const [from, to] of refused) {
    assert.deepEqual(
      decideTransition(at(from), at(to)),
      { apply: false, reason: 'not_allowed' },
      `${from}→${to}`,
    );
  }
});

test('SUCCESS→SUCCESS applies only when it adds a serial number', () => {
  assert.deepEqual(decideTransition(at('SUCCESS'), at('SUCCESS', 'SN-1')), {
    apply: true,
    reason: 'serial_added',
  });
  assert.deepEqual(decideTransition(at('SUCCESS', 'SN-1'), at('SUCCESS', 'SN-2')), {
    apply: false,
    reason: 'duplicate',
  });
  assert.deepEqual(decideTransition(at('SUCCESS', 'SN-1'), at('SUCCESS')), {
    apply: false,
    reason: 'duplicate',
  });
});

test('a status outside the table is not final and does not move the order', () => {
  assert.equal(isFinalStatus('ON_HOLD'), false);
  assert.deepEqual(decideTransition(at('PENDING'), at('ON_HOLD')), {
    apply: false,
    reason: 'unknown_status',
  });
  assert.equal(decideTransition(at('ON_HOLD'), at('SUCCESS')).apply, true);
  assert.deepEqual(['SUCCESS', 'FAILED', 'REFUNDED', 'PENDING', 'PROCESSING'].map(isFinalStatus), [
    true,
    true,
    true,
    false,
    false,
  ]);
});

test('a snapshot applies to an order with no status yet, and may skip ahead to a reachable state', () => {
  assert.deepEqual(decideSnapshot({ status: null, serial_number: null }, at('SUCCESS', 'SN')), {
    apply: true,
    reason: 'initial',
  });
  assert.deepEqual(decideSnapshot({ status: 'PENDING', serial_number: null }, at('REFUNDED')), {
    apply: true,
    reason: 'transition',
  });
  assert.deepEqual(decideSnapshot({ status: 'FAILED', serial_number: null }, at('REFUNDED')), {
    apply: false,
    reason: 'not_allowed',
  });
  assert.deepEqual(decideSnapshot({ status: 'SUCCESS', serial_number: 'SN' }, at('PROCESSING')), {
    apply: false,
    reason: 'not_allowed',
  });
});
