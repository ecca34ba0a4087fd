import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compareOrderViews, type OrderViews } from '../../src/demo/upstreams-agreement.js';
import type { PublicAttempt, PublicOrder } from '../../src/domain/public-order.js';
import type { Order } from '../../src/upstream/model.js';

const SUCCESS_AT = '2026-11-29T06:00:01.000Z';

/** An upstream's order as its simulator lists it: only what the comparison reads. */
function upstreamOrder(partner_ref: string, status: Order['status'], invoice: string): Order {
  return {
    partner_ref,
    status,
    invoice_number: invoice,
    serial_number: status === 'SUCCESS' ? `SN-${invoice}` : null,
    success_at: status === 'SUCCESS' ? SUCCESS_AT : null,
  } as Order;
}

function attempt(n: number, upstream: string, fields: Partial<PublicAttempt>): PublicAttempt {
  return {
    attempt: n,
    upstream,
    partner_ref: n === 1 ? 'R1' : `R1~${n}`,
    invoice_number: null,
    status: null,
    submission: 'accepted',
    chosen: null,
    ended: null,
    ...fields,
  };
}

/** R1 as the store has it: FAILED on beta (INV-B1), then SUCCESS on default (INV-D1). */
const stored = {
  partner_ref: 'R1',
  upstream: 'default',
  status: 'SUCCESS',
  submission: 'accepted',
  outcome: 'delivered',
  invoice_number: 'INV-D1',
  serial_number: 'SN-INV-D1',
  success_at: SUCCESS_AT,
  version: 7,
  attempts: [
    attempt(1, 'beta', {
      invoice_number: 'INV-B1',
      status: 'FAILED',
      ended: { code: 'FAILED', detail: 'failed upstream' },
    }),
    attempt(2, 'default', { invoice_number: 'INV-D1', status: 'SUCCESS' }),
  ],
} as unknown as PublicOrder;

const agreeing: OrderViews = {
  partnerRef: 'R1',
  local: stored,
  skipped: [],
  upstreams: new Map([
    ['default', [upstreamOrder('R1~2', 'SUCCESS', 'INV-D1'), upstreamOrder('R10', 'SUCCESS', 'INV-D9')]],
    ['beta', [upstreamOrder('R1', 'FAILED', 'INV-B1')]],
  ]),
  held: stored,
};

test('an order failed over from beta to default agrees when each attempt is on its upstream as the store says and the shop holds the latest version', () => {
  const row = compareOrderViews(agreeing);

  assert.equal(row.attempts, 'beta FAILED → default SUCCESS');
  assert.deepEqual(row.upstreams, { default: '#2 SUCCESS', beta: '#1 FAILED' }, 'R10 is another order');
  assert.deepEqual(row.failovers, ['FAILED']);
  assert.equal(row.store, 'SUCCESS on default');
  assert.equal(row.successes, 1);
  assert.equal(row.agrees, true);
});

test('a second SUCCESS on another upstream, an attempt the store does not know, or an upstream status the store lacks is a disagreement', () => {
  const twice = compareOrderViews({
    ...agreeing,
    upstreams: new Map([...agreeing.upstreams, ['beta', [upstreamOrder('R1', 'SUCCESS', 'INV-B1')]]]),
  });
  assert.equal(twice.successes, 2);
  assert.equal(twice.agrees, false);

  const unknown = compareOrderViews({
    ...agreeing,
    upstreams: new Map([
      ...agreeing.upstreams,
      ['beta', [upstreamOrder('R1', 'FAILED', 'INV-B1'), upstreamOrder('R1~3', 'PENDING', 'INV-B2')]],
    ]),
  });
  assert.equal(unknown.storeAgreesWithUpstreams, false);

  const refusedButThere = compareOrderViews({
    ...agreeing,
    local: {
      ...stored,
      attempts: [
        attempt(1, 'beta', {
          submission: 'rejected',
          ended: { code: 'INSUFFICIENT_BALANCE', detail: 'balance' },
        }),
        stored.attempts[1]!,
      ],
    },
  });
  assert.equal(refusedButThere.attempts, 'beta INSUFFICIENT_BALANCE → default SUCCESS');
  assert.equal(
    refusedButThere.storeAgreesWithUpstreams,
    false,
    'beta holds R1, which the store says it refused',
  );
});

test('an order the store has not ended, or whose latest version the shop does not hold, does not agree yet', () => {
  const open = { ...stored, status: 'PENDING', outcome: null } as unknown as PublicOrder;
  assert.equal(compareOrderViews({ ...agreeing, local: open, held: open }).final, false);
  const older = { ...stored, version: 6 } as PublicOrder;
  const behind = compareOrderViews({ ...agreeing, held: older });
  assert.equal(behind.shopAgrees, false);
  assert.equal(behind.agrees, false);
});
