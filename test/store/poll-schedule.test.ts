import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openOrderStore } from '../../src/store/order-store.js';
import type { PollScheduleSettings } from '../../src/store/poll-schedule.js';
import { scheduleSettings, snapshot, tempStore } from '../helpers/store.js';

const DATA = { user_id: '12345678', server_id: '2001' };
const refs = (orders: { partnerRef: string }[]) => orders.map((o) => o.partnerRef);

test('a non-final order becomes due for a poll firstPollDelayMs after it last changed, not before', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 30_000 });
  store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });

  clock.advance(29_999);
  assert.deepEqual(store.schedule.dueForPoll(10), []);
  clock.advance(1);
  assert.deepEqual(refs(store.schedule.dueForPoll(10)), ['R1']);
});

test('a change pushes the first poll back and resets the poll count; a non-change keeps the schedule', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 30_000, backoffMs: [60_000] });
  store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
  clock.advance(30_000);
  store.schedule.recordPoll('R1'); // unchanged: the next poll after backoffMs[0]
  clock.advance(10_000);

  const duplicate = store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'poll' });
  assert.equal(duplicate.order.nextPollAt, clock.now() + 50_000);
  assert.equal(duplicate.order.pollCount, 1);

  const moved = store.writer.applyOrderSnapshot(snapshot('R1', 'PROCESSING'), {
    source: 'webhook',
    eventId: 'e1',
  });
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
    store.writer.applyOrderSnapshot(snapshot(ref, 'PROCESSING'), { source: 'create' });
    const { order } = store.writer.applyOrderSnapshot(snapshot(ref, status, { serial_number: 'SN' }), {
      source: 'poll',
    });
    assert.equal(order.nextPollAt, null, ref);
    assert.equal(order.finalAt, clock.now(), ref);
  }
  clock.advance(86_400_000);
  assert.deepEqual(store.schedule.dueForPoll(10), []);
});

test('a SUCCESS without a serial number stays due for a poll until the serial arrives', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 1_000 });
  const success = store.writer.applyOrderSnapshot(snapshot('R1', 'SUCCESS'), {
    source: 'webhook',
    eventId: 'e1',
  });
  assert.equal(success.order.finalAt, clock.now());
  clock.advance(1_000);
  assert.deepEqual(refs(store.schedule.dueForPoll(10)), ['R1']);

  clock.advance(5_000);
  const serial = store.writer.applyOrderSnapshot(snapshot('R1', 'SUCCESS', { serial_number: 'SN' }), {
    source: 'poll',
  });

  assert.equal(serial.order.nextPollAt, null);
  assert.equal(serial.order.finalAt, success.order.finalAt);
  assert.deepEqual(store.schedule.dueForPoll(10), []);
});

test('a pending local order is due for a poll too, so a placement that died is still resolved', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 30_000 });
  store.writer.createLocalOrder({ partnerRef: 'R1', data: DATA });

  clock.advance(30_000);

  assert.deepEqual(refs(store.schedule.dueForPoll(10)), ['R1']);
});

test('due orders come longest-due first, at most limit of them', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 0, backoffMs: [3] });
  for (const ref of ['A', 'B', 'C'])
    store.writer.applyOrderSnapshot(snapshot(ref, 'PENDING'), { source: 'create' });
  // Polled 1 ms apart, each due 3 ms after its poll: B at now + 1, C at now + 2, A at now + 3.
  store.schedule.recordPoll('B');
  clock.advance(1);
  store.schedule.recordPoll('C');
  clock.advance(1);
  store.schedule.recordPoll('A');

  assert.deepEqual(refs(store.schedule.dueForPoll(10, clock.now() + 2)), ['B', 'C']);
  assert.deepEqual(refs(store.schedule.dueForPoll(2, clock.now() + 10)), ['B', 'C']);
  assert.deepEqual(refs(store.schedule.dueForPoll(10, clock.now() + 10)), ['B', 'C', 'A']);
});

test('a claim bounded by a pass start takes no order that became due after it, so a pass polls each order once', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 0, backoffMs: [100] });
  store.writer.applyOrderSnapshot(snapshot('P1', 'PENDING'), { source: 'create' });
  const passStart = clock.now();
  const [first] = store.schedule.claimDueForPoll(1, { dueBy: passStart });
  assert.equal(first?.partnerRef, 'P1');
  // Polled and rescheduled 100 ms on (the backoff), while the pass goes on for longer than that.
  store.schedule.recordPoll('P1');
  clock.advance(500);
  assert.deepEqual(store.schedule.claimDueForPoll(1, { dueBy: passStart }), []);
  assert.deepEqual(refs(store.schedule.claimDueForPoll(1)), ['P1'], 'the next pass takes it');
});

test('recording a poll counts it, sets the next poll time, and marks the order stuck once', (t) => {
  const { store, clock } = tempStore(t, { backoffMs: [60_000, 3_600_000], stuckAfterMs: 1_000 });
  store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
  clock.advance(1_000); // open for stuckAfterMs without a final state: stuck from now on
  const firstPoll = clock.now();

  const once = store.schedule.recordPoll('R1');
  clock.advance(60_000);
  const twice = store.schedule.recordPoll('R1');

  assert.deepEqual([once.pollCount, once.lastPolledAt, once.stuckAt], [1, firstPoll, firstPoll]);
  assert.equal(once.nextPollAt, firstPoll + 3_600_000, 'a stuck order is polled at the longest interval');
  assert.deepEqual([twice.pollCount, twice.lastPolledAt, twice.stuckAt], [2, clock.now(), firstPoll]);
  assert.equal(twice.nextPollAt, clock.now() + 3_600_000);
});

test('polls that change nothing back off through backoffMs, the last repeating; a poll that changes the order starts over', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 500, backoffMs: [1_000, 2_000, 5_000] });
  store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
  const delays: number[] = [];
  const poll = (changed: boolean) => {
    clock.advance(store.queries.getOrder('R1')!.nextPollAt! - clock.now());
    const order = store.schedule.recordPoll('R1', { changed });
    delays.push(order.nextPollAt! - clock.now());
    return order;
  };

  for (let i = 0; i < 4; i++) poll(false);
  const changed = poll(true);
  poll(false);

  assert.deepEqual(delays, [1_000, 2_000, 5_000, 5_000, 500, 1_000]);
  assert.equal(changed.pollCount, 0, 'the count restarts with the change');
});

test('a failed poll puts the order on its own backoff without counting as an answer', (t) => {
  const { store, clock } = tempStore(t, { firstPollDelayMs: 500, backoffMs: [1_000, 2_000] });
  store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
  clock.advance(500);
  const answered = store.schedule.recordPoll('R1');
  clock.advance(1_000);

  const failed = store.schedule.recordFailedPoll('R1');

  assert.equal(failed.lastPolledAt, answered.lastPolledAt, 'the last answer stays the last poll');
  assert.equal(failed.pollCount, 2);
  assert.equal(failed.nextPollAt, clock.now() + 2_000, 'the next backoff interval');
  assert.equal(store.schedule.claimDueForPoll(1).length, 0, 'and its lease ended: nothing is due yet');
});

test('recording a poll after its answer settled the order does not schedule another', (t) => {
  const { store } = tempStore(t);
  store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
  store.writer.applyOrderSnapshot(snapshot('R1', 'FAILED'), { source: 'poll' });

  const order = store.schedule.recordPoll('R1');

  assert.equal(order.nextPollAt, null);
  assert.equal(order.pollCount, 1);
});

test('a schedule that cannot work is refused when the store is opened, naming the setting', (t) => {
  const refused: [Partial<PollScheduleSettings>, RegExp][] = [
    [{ firstPollDelayMs: -1 }, /^firstPollDelayMs must be a number of ms ≥ 0, got -1$/],
    [{ backoffMs: [] }, /^backoffMs must be one or more intervals > 0 ms, got \[\]$/],
    [{ backoffMs: [60_000, 0] }, /^backoffMs must be one or more intervals > 0 ms, got \[60000,0\]$/],
    [{ stuckAfterMs: 0 }, /^stuckAfterMs must be > 0 ms, got 0$/],
    [{ leaseMs: 0 }, /^leaseMs must be > 0 ms, got 0$/],
    [{ auditWindowMs: Number.NaN }, /^auditWindowMs must be a number of ms ≥ 0, got NaN$/],
    [{ auditEveryMs: 0 }, /^auditEveryMs must be > 0 ms, got 0$/],
  ];
  for (const [settings, message] of refused) {
    assert.throws(() => tempStore(t, settings), { name: 'RangeError', message });
  }
});

test('the audit claims settled SUCCESS orders of its window, least recently checked first, each once per auditEveryMs, and none when the window is 0', (t) => {
  const DAY = 86_400_000;
  const { store, clock, db } = tempStore(t, { auditWindowMs: 3 * DAY, auditEveryMs: DAY });
  const success = (ref: string) =>
    store.writer.applyOrderSnapshot(snapshot(ref, 'SUCCESS', { serial_number: `SN-${ref}` }), {
      source: 'webhook',
    });
  const claimAll = (schedule = store.schedule, options?: { checkedBefore?: number }) => {
    const claimed: string[] = [];
    for (let o = schedule.claimForAudit(options); o; o = schedule.claimForAudit(options)) {
      claimed.push(o.partnerRef);
      schedule.recordPoll(o.partnerRef);
    }
    return claimed;
  };
  success('A'); // final at t0
  clock.advance(DAY / 2);
  success('B'); // final at t0 + 12 h
  store.writer.applyOrderSnapshot(snapshot('OPEN', 'PENDING'), { source: 'create' });
  store.writer.applyOrderSnapshot(snapshot('FAILED', 'FAILED'), { source: 'create' });

  clock.advance(DAY / 2);
  assert.deepEqual(claimAll(), ['A'], 't0 + 24 h: only A was checked a day ago');
  clock.advance(DAY / 2);
  assert.deepEqual(claimAll(), ['B'], 't0 + 36 h: B, not A (read 12 h ago)');
  clock.advance(1.5 * DAY);
  assert.deepEqual(claimAll(), ['A', 'B'], 't0 + 72 h: the least recently checked first');
  clock.advance(DAY);
  assert.deepEqual(claimAll(), [], 't0 + 96 h: both have left the three-day window');

  const often = openOrderStore(db, scheduleSettings({ auditWindowMs: 10 * DAY, auditEveryMs: 1 }), {
    now: clock.now,
  });
  const passStart = clock.now();
  clock.advance(1000);
  assert.deepEqual(claimAll(often.schedule, { checkedBefore: passStart }), ['A', 'B']);
  clock.advance(1000);
  assert.deepEqual(
    claimAll(often.schedule, { checkedBefore: passStart }),
    [],
    'none twice in one pass, however short auditEveryMs',
  );
  const off = openOrderStore(db, scheduleSettings({ auditWindowMs: 0 }), { now: clock.now });
  clock.advance(10 * DAY);
  assert.equal(off.schedule.claimForAudit(), undefined);
});
