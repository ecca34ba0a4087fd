import assert from 'node:assert/strict';
import { test } from 'node:test';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const DATA = { user_id: '12345678', server_id: '2001' };

describeEachBackend('order queries', (backend) => {
  test('an order is found by partner_ref or by invoice number; an unknown ref finds nothing', async (t) => {
    const { store } = await backend.tempStore(t);
    const { order } = await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });

    assert.deepEqual(await store.queries.getOrder('R1'), order);
    assert.deepEqual(await store.queries.getOrder('INV-R1'), order);
    assert.equal(await store.queries.getOrder('NOPE'), undefined);
    assert.equal((await store.queries.listEvents('INV-R1')).length, 1);
    assert.deepEqual(await store.queries.listEvents('NOPE'), []);
  });

  test('orders are listed newest first, filtered by status, submission state or raw upstream status', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('A', 'PENDING'), { source: 'poll' });
    clock.advance(1);
    await store.writer.applyOrderSnapshot(snapshot('B', 'SUCCESS'), { source: 'poll' });
    clock.advance(1);
    await store.writer.createLocalOrder({ partnerRef: 'C', data: DATA });
    await store.writer.markRejected('C', 'INVALID_PRODUCT', 'no such product');
    clock.advance(1);
    await store.writer.applyOrderSnapshot(snapshot('D', 'PENDING'), { source: 'poll' });
    clock.advance(1);
    await store.writer.applyOrderSnapshot(snapshot('E', 'ON_HOLD'), { source: 'poll' });

    const refs = (orders: { partnerRef: string }[]) => orders.map((o) => o.partnerRef);
    assert.deepEqual(refs(await store.queries.listOrders()), ['E', 'D', 'C', 'B', 'A']);
    assert.deepEqual(refs(await store.queries.listOrders({ limit: 2 })), ['E', 'D']);
    assert.deepEqual(refs(await store.queries.listOrders({ status: 'PENDING' })), ['D', 'A']);
    assert.deepEqual(refs(await store.queries.listOrders({ status: 'rejected' })), ['C']);
    assert.deepEqual(refs(await store.queries.listOrders({ status: 'ON_HOLD' })), ['E']);
    await assert.rejects(() => store.queries.listOrders({ limit: 0 }), RangeError);
  });

  test('the counts show orders by status and submission state, open, due and stuck orders', async (t) => {
    const { store, clock } = await backend.tempStore(t, {
      firstPollDelayMs: 1_000,
      backoffMs: [60_000],
      stuckAfterMs: 1,
    });
    const start = clock.now();
    await store.writer.applyOrderSnapshot(snapshot('A', 'PENDING'), { source: 'poll' });
    await store.writer.applyOrderSnapshot(snapshot('B', 'SUCCESS', { serial_number: 'SN' }), {
      source: 'poll',
    });
    await store.writer.applyOrderSnapshot(snapshot('C', 'ON_HOLD'), { source: 'poll' });
    await store.writer.createLocalOrder({ partnerRef: 'D', data: DATA });
    await store.writer.createLocalOrder({ partnerRef: 'E', data: DATA });
    await store.writer.markRejected('E', 'INVALID_TARGET', 'user_id');
    clock.advance(1);
    await store.claims.recordPoll('A'); // open for stuckAfterMs: marked stuck, next poll in a minute

    const counts = await store.queries.countByStatus(start + 1_000);

    assert.deepEqual(counts, {
      total: 5,
      byStatus: { ON_HOLD: 1, PENDING: 1, SUCCESS: 1 },
      bySubmissionState: {
        queued: 0,
        pending: 1,
        accepted: 3,
        rejected: 1,
        unknown: 0,
        blocked: 0,
        cancelled: 0,
      },
      open: 3,
      oldestOpenLocalCreatedAt: start,
      dueForPoll: 2,
      stuck: 1,
    });
  });

  test('the blocked and the queued orders are listed newest first, from the waiting orders only', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    for (const ref of ['Q1', 'B1', 'S1', 'B2', 'Q2']) {
      clock.advance(1);
      if (ref.startsWith('S')) {
        await store.writer.applyOrderSnapshot(snapshot(ref, 'SUCCESS'), { source: 'poll' });
        continue;
      }
      await store.writer.createLocalOrder({ partnerRef: ref, data: DATA, queued: true });
      if (ref.startsWith('B')) await store.writer.markBlocked(ref, 'INVALID_API_KEY', 'the key was refused');
    }
    const refs = async (status: string, limit?: number) =>
      (await store.queries.listOrders({ status, ...(limit ? { limit } : {}) })).map((o) => o.partnerRef);
    assert.deepEqual(await refs('blocked'), ['B2', 'B1']);
    assert.deepEqual(await refs('blocked', 1), ['B2']);
    assert.deepEqual(await refs('queued'), ['Q2', 'Q1']);
    assert.deepEqual(await refs('accepted'), ['S1']);
  });
});
