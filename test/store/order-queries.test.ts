import assert from 'node:assert/strict';
import { test } from 'node:test';
import { snapshot, tempStore } from '../helpers/store.js';

const DATA = { user_id: '12345678', server_id: '2001' };

test('an order is found by partner_ref or by invoice number; an unknown ref finds nothing', (t) => {
  const { store } = tempStore(t);
  const { order } = store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });

  assert.deepEqual(store.queries.getOrder('R1'), order);
  assert.deepEqual(store.queries.getOrder('INV-R1'), order);
  assert.equal(store.queries.getOrder('NOPE'), undefined);
  assert.equal(store.queries.listEvents('INV-R1').length, 1);
  assert.deepEqual(store.queries.listEvents('NOPE'), []);
});

test('orders are listed newest first, filtered by status, submission state or raw upstream status', (t) => {
  const { store, clock } = tempStore(t);
  store.writer.applyOrderSnapshot(snapshot('A', 'PENDING'), { source: 'poll' });
  clock.advance(1);
  store.writer.applyOrderSnapshot(snapshot('B', 'SUCCESS'), { source: 'poll' });
  clock.advance(1);
  store.writer.createLocalOrder({ partnerRef: 'C', data: DATA });
  store.writer.markRejected('C', 'INVALID_PRODUCT', 'no such product');
  clock.advance(1);
  store.writer.applyOrderSnapshot(snapshot('D', 'PENDING'), { source: 'poll' });
  clock.advance(1);
  store.writer.applyOrderSnapshot(snapshot('E', 'ON_HOLD'), { source: 'poll' });

  const refs = (orders: { partnerRef: string }[]) => orders.map((o) => o.partnerRef);
  assert.deepEqual(refs(store.queries.listOrders()), ['E', 'D', 'C', 'B', 'A']);
  assert.deepEqual(refs(store.queries.listOrders({ limit: 2 })), ['E', 'D']);
  assert.deepEqual(refs(store.queries.listOrders({ status: 'PENDING' })), ['D', 'A']);
  assert.deepEqual(refs(store.queries.listOrders({ status: 'rejected' })), ['C']);
  assert.deepEqual(refs(store.queries.listOrders({ status: 'ON_HOLD' })), ['E']);
  assert.throws(() => store.queries.listOrders({ limit: 0 }), RangeError);
});

test('the counts show orders by status and submission state, open, due and stuck orders', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 1_000, backoffMs: [60_000], stuckAfterMs: 1 });
  const start = clock.now();
  store.writer.applyOrderSnapshot(snapshot('A', 'PENDING'), { source: 'poll' });
  store.writer.applyOrderSnapshot(snapshot('B', 'SUCCESS', { serial_number: 'SN' }), { source: 'poll' });
  store.writer.applyOrderSnapshot(snapshot('C', 'ON_HOLD'), { source: 'poll' });
  store.writer.createLocalOrder({ partnerRef: 'D', data: DATA });
  store.writer.createLocalOrder({ partnerRef: 'E', data: DATA });
  store.writer.markRejected('E', 'INVALID_TARGET', 'user_id');
  clock.advance(1);
  store.schedule.recordPoll('A'); // open for stuckAfterMs: marked stuck, next poll in a minute

  const counts = store.queries.countByStatus(start + 1_000);

  assert.deepEqual(counts, {
    total: 5,
    byStatus: { ON_HOLD: 1, PENDING: 1, SUCCESS: 1 },
    bySubmissionState: { queued: 0, pending: 1, accepted: 3, rejected: 1, unknown: 0, blocked: 0 },
    open: 3,
    oldestOpenLocalCreatedAt: start,
    dueForPoll: 2,
    stuck: 1,
  });
});
