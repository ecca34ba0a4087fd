import assert from 'node:assert/strict';
import { test } from 'node:test';
import { snapshot, tempStore } from '../helpers/store.js';

const DATA = { user_id: '12345678', server_id: '2001' };
const refs = (orders: { partnerRef: string }[]) => orders.map((o) => o.partnerRef);

test('a non-final order becomes due for a poll firstPollDelayMs after it last changed, not before', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 30_000 });
  store.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });

  clock.advance(29_999);
  assert.deepEqual(store.dueForPoll(10), []);
  clock.advance(1);
  assert.deepEqual(refs(store.dueForPoll(10)), ['R1']);
});

test('a change pushes the first poll back and resets the poll count; a non-change keeps the schedule', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 30_000 });
  store.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
  clock.advance(30_000);
  store.recordPoll('R1', { nextPollAt: clock.now() + 60_000 });
  clock.advance(10_000);

  const duplicate = store.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'poll' });
  assert.equal(duplicate.order.nextPollAt, clock.now() + 50_000);
  assert.equal(duplicate.order.pollCount, 1);

  const moved = store.applyOrderSnapshot(snapshot('R1', 'PROCESSING'), { source: 'webhook', eventId: 'e1' });
  assert.equal(moved.order.nextPollAt, clock.now() + 30_000);
  assert.equal(moved.order.pollCount, 0);
});

test('a final order is no longer due for a poll, and remembers when it became final', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 1_000 });
  for (const [ref, status] of [
    ['F', 'FAILED'],
    ['S', 'SUCCESS'],
    ['R', 'REFUNDED'],
  ] as const) {
    store.applyOrderSnapshot(snapshot(ref, 'PROCESSING'), { source: 'create' });
    const { order } = store.applyOrderSnapshot(snapshot(ref, status, { serial_number: 'SN' }), {
      source: 'poll',
    });
    assert.equal(order.nextPollAt, null, ref);
    assert.equal(order.finalAt, clock.now(), ref);
  }
  clock.advance(86_400_000);
  assert.deepEqual(store.dueForPoll(10), []);
});

test('a SUCCESS without a serial number stays due for a poll until the serial arrives', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 1_000 });
  const success = store.applyOrderSnapshot(snapshot('R1', 'SUCCESS'), { source: 'webhook', eventId: 'e1' });
  assert.equal(success.order.finalAt, clock.now());
  clock.advance(1_000);
  assert.deepEqual(refs(store.dueForPoll(10)), ['R1']);

  clock.advance(5_000);
  const serial = store.applyOrderSnapshot(snapshot('R1', 'SUCCESS', { serial_number: 'SN' }), {
    source: 'poll',
  });

  assert.equal(serial.order.nextPollAt, null);
  assert.equal(serial.order.finalAt, success.order.finalAt);
  assert.deepEqual(store.dueForPoll(10), []);
});

test('a pending local order is due for a poll too, so a placement that died is still resolved', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 30_000 });
  store.createLocalOrder({ partnerRef: 'R1', data: DATA });

  clock.advance(30_000);

  assert.deepEqual(refs(store.dueForPoll(10)), ['R1']);
});

test('due orders come longest-due first, at most limit of them', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 0 });
  for (const ref of ['A', 'B', 'C']) store.applyOrderSnapshot(snapshot(ref, 'PENDING'), { source: 'create' });
  store.recordPoll('A', { nextPollAt: clock.now() + 3 });
  store.recordPoll('B', { nextPollAt: clock.now() + 1 });
  store.recordPoll('C', { nextPollAt: clock.now() + 2 });

  assert.deepEqual(refs(store.dueForPoll(10, clock.now() + 2)), ['B', 'C']);
  assert.deepEqual(refs(store.dueForPoll(2, clock.now() + 10)), ['B', 'C']);
  assert.deepEqual(refs(store.dueForPoll(10, clock.now() + 10)), ['B', 'C', 'A']);
});

test('a claim bounded by a pass start takes no order that became due after it, so a pass polls each order once', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 0 });
  store.applyOrderSnapshot(snapshot('P1', 'PENDING'), { source: 'create' });
  const passStart = clock.now();
  const [first] = store.claimDueForPoll(1, clock.now(), 60_000, passStart);
  assert.equal(first?.partnerRef, 'P1');
  // Polled and rescheduled 100 ms on, while the pass goes on for longer than that.
  store.recordPoll('P1', { nextPollAt: clock.now() + 100 });
  clock.advance(500);
  assert.deepEqual(store.claimDueForPoll(1, clock.now(), 60_000, passStart), []);
  assert.deepEqual(refs(store.claimDueForPoll(1, clock.now(), 60_000)), ['P1'], 'the next pass takes it');
});

test('recording a poll counts it, sets the next poll time, and marks the order stuck once', (t) => {
  const { store, clock } = tempStore(t);
  store.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
  const firstPoll = clock.now();

  const once = store.recordPoll('R1', { nextPollAt: firstPoll + 60_000, stuck: true });
  clock.advance(60_000);
  const twice = store.recordPoll('R1', { nextPollAt: clock.now() + 3_600_000, stuck: true });

  assert.deepEqual([once.pollCount, once.lastPolledAt, once.stuckAt], [1, firstPoll, firstPoll]);
  assert.deepEqual([twice.pollCount, twice.lastPolledAt, twice.stuckAt], [2, clock.now(), firstPoll]);
  assert.equal(twice.nextPollAt, clock.now() + 3_600_000);
});

test('recording a poll after its answer settled the order does not schedule another', (t) => {
  const { store, clock } = tempStore(t);
  store.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
  store.applyOrderSnapshot(snapshot('R1', 'FAILED'), { source: 'poll' });

  const order = store.recordPoll('R1', { nextPollAt: clock.now() + 60_000 });

  assert.equal(order.nextPollAt, null);
  assert.equal(order.pollCount, 1);
});
