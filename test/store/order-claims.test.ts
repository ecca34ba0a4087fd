import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PollScheduleSettings } from '../../src/store/order-claims.js';
import { withClaims } from '../../src/store/order-store.js';
import { planFirstPolls, scheduleSettings, snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const DATA = { user_id: '12345678', server_id: '2001' };
const refs = (orders: { partnerRef: string }[]) => orders.map((o) => o.partnerRef);

describeEachBackend('the claims on orders and the record of their polls', (backend) => {
  test('a non-final order becomes due for a poll firstPollDelayMs after it last changed, not before', async (t) => {
    const { store, clock } = await backend.tempStore(t, { firstPollDelayMs: 30_000 });
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });

    clock.advance(29_999);
    assert.deepEqual(await store.claims.dueForPoll(10), []);
    clock.advance(1);
    assert.deepEqual(refs(await store.claims.dueForPoll(10)), ['R1']);
  });

  test("the claims of one upstream never take another upstream's orders: its client would ask the wrong supplier", async (t) => {
    const { store, clock } = await backend.tempStore(t, { firstPollDelayMs: 1_000 });
    await planFirstPolls(store, 'beta');
    await store.writer.applyOrderSnapshot(snapshot('on-default', 'PENDING'), { source: 'create' });
    await store.writer.applyOrderSnapshot(snapshot('on-beta', 'PENDING'), {
      source: 'webhook',
      eventId: 'beta/e1',
      upstream: 'beta',
    });
    clock.advance(1_000);
    const beta = withClaims(store, store.claims.settings, 'beta');

    assert.deepEqual(refs(await store.claims.dueForPoll(10)), ['on-default']);
    assert.deepEqual(await store.claims.claimOrder('on-beta'), {
      order: await store.queries.getOrder('on-beta'),
      claimed: false,
    });
    assert.deepEqual(refs(await beta.claims.claimDueForPoll(10)), ['on-beta']);
    assert.deepEqual(refs(await store.claims.claimDueForPoll(10)), ['on-default']);
  });

  test("a poll's or a create's answer, the default upstream's client's, never changes another upstream's order", async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('on-beta', 'PROCESSING'), {
      source: 'webhook',
      eventId: 'beta/e1',
      upstream: 'beta',
    });

    const polled = await store.writer.applyOrderSnapshot(snapshot('on-beta', 'FAILED'), { source: 'poll' });

    assert.equal(polled.reason, 'wrong_upstream');
    assert.equal((await store.queries.getOrder('on-beta'))?.status, 'PROCESSING');
  });

  test("the audit and the submission pump of one upstream never take another upstream's orders", async (t) => {
    const { store, clock } = await backend.tempStore(t, { auditWindowMs: 86_400_000, auditEveryMs: 1 });
    const beta = withClaims(store, store.claims.settings, 'beta');
    await store.writer.applyOrderSnapshot(snapshot('beta-success', 'SUCCESS', { serial_number: 'SN' }), {
      source: 'webhook',
      eventId: 'beta/e2',
      upstream: 'beta',
    });
    await store.writer.createLocalOrder({
      partnerRef: 'beta-queued',
      productCode: 'ML86',
      data: DATA,
      queued: true,
      upstream: 'beta',
    });
    clock.advance(60_000);

    assert.equal(await store.claims.claimForAudit(), undefined);
    assert.equal(await store.claims.claimNextQueued(), undefined);
    assert.equal((await beta.claims.claimForAudit())?.partnerRef, 'beta-success');
    assert.equal((await beta.claims.claimNextQueued())?.partnerRef, 'beta-queued');
  });

  test('a change pushes the first poll back and resets the poll count; a non-change keeps the schedule', async (t) => {
    const { store, clock } = await backend.tempStore(t, { firstPollDelayMs: 30_000, backoffMs: [60_000] });
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
    clock.advance(30_000);
    await store.claims.recordPoll('R1'); // unchanged: the next poll after backoffMs[0]
    clock.advance(10_000);

    const duplicate = await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'poll' });
    assert.equal(duplicate.order.nextPollAt, clock.now() + 50_000);
    assert.equal(duplicate.order.pollCount, 1);

    const moved = await store.writer.applyOrderSnapshot(snapshot('R1', 'PROCESSING'), {
      source: 'webhook',
      eventId: 'e1',
    });
    assert.equal(moved.order.nextPollAt, clock.now() + 30_000);
    assert.equal(moved.order.pollCount, 0);
  });

  test('a final order is no longer due for a poll, and remembers when it became final', async (t) => {
    const { store, clock } = await backend.tempStore(t, { firstPollDelayMs: 1_000 });
    for (const [ref, status] of [
      ['F', 'FAILED'],
      ['S', 'SUCCESS'],
      ['R', 'REFUNDED'],
    ] as const) {
      await store.writer.applyOrderSnapshot(snapshot(ref, 'PROCESSING'), { source: 'create' });
      const { order } = await store.writer.applyOrderSnapshot(
        snapshot(ref, status, { serial_number: 'SN' }),
        {
          source: 'poll',
        },
      );
      assert.equal(order.nextPollAt, null, ref);
      assert.equal(order.finalAt, clock.now(), ref);
    }
    clock.advance(86_400_000);
    assert.deepEqual(await store.claims.dueForPoll(10), []);
  });

  test('a SUCCESS without a serial number stays due for a poll until the serial arrives', async (t) => {
    const { store, clock } = await backend.tempStore(t, { firstPollDelayMs: 1_000 });
    const success = await store.writer.applyOrderSnapshot(snapshot('R1', 'SUCCESS'), {
      source: 'webhook',
      eventId: 'e1',
    });
    assert.equal(success.order.finalAt, clock.now());
    clock.advance(1_000);
    assert.deepEqual(refs(await store.claims.dueForPoll(10)), ['R1']);

    clock.advance(5_000);
    const serial = await store.writer.applyOrderSnapshot(snapshot('R1', 'SUCCESS', { serial_number: 'SN' }), {
      source: 'poll',
    });

    assert.equal(serial.order.nextPollAt, null);
    assert.equal(serial.order.finalAt, success.order.finalAt);
    assert.deepEqual(await store.claims.dueForPoll(10), []);
  });

  test('a pending local order is due for a poll too, so a placement that died is still resolved', async (t) => {
    const { store, clock } = await backend.tempStore(t, { firstPollDelayMs: 30_000 });
    await store.writer.createLocalOrder({ partnerRef: 'R1', data: DATA });

    clock.advance(30_000);

    assert.deepEqual(refs(await store.claims.dueForPoll(10)), ['R1']);
  });

  test('due orders come longest-due first, at most limit of them', async (t) => {
    const { store, clock } = await backend.tempStore(t, { firstPollDelayMs: 0, backoffMs: [3] });
    for (const ref of ['A', 'B', 'C'])
      await store.writer.applyOrderSnapshot(snapshot(ref, 'PENDING'), { source: 'create' });
    // Polled 1 ms apart, each due 3 ms after its poll: B at now + 1, C at now + 2, A at now + 3.
    await store.claims.recordPoll('B');
    clock.advance(1);
    await store.claims.recordPoll('C');
    clock.advance(1);
    await store.claims.recordPoll('A');

    assert.deepEqual(refs(await store.claims.dueForPoll(10, clock.now() + 2)), ['B', 'C']);
    assert.deepEqual(refs(await store.claims.dueForPoll(2, clock.now() + 10)), ['B', 'C']);
    assert.deepEqual(refs(await store.claims.dueForPoll(10, clock.now() + 10)), ['B', 'C', 'A']);
  });

  test('a claim bounded by a pass start takes no order that became due after it, so a pass polls each order once', async (t) => {
    const { store, clock } = await backend.tempStore(t, { firstPollDelayMs: 0, backoffMs: [100] });
    await store.writer.applyOrderSnapshot(snapshot('P1', 'PENDING'), { source: 'create' });
    const passStart = clock.now();
    const [first] = await store.claims.claimDueForPoll(1, { dueBy: passStart });
    assert.equal(first?.partnerRef, 'P1');
    // Polled and rescheduled 100 ms on (the backoff), while the pass goes on for longer than that.
    await store.claims.recordPoll('P1');
    clock.advance(500);
    assert.deepEqual(await store.claims.claimDueForPoll(1, { dueBy: passStart }), []);
    assert.deepEqual(refs(await store.claims.claimDueForPoll(1)), ['P1'], 'the next pass takes it');
  });

  test('recording a poll counts it, sets the next poll time, and marks the order stuck once', async (t) => {
    const { store, clock } = await backend.tempStore(t, {
      backoffMs: [60_000, 3_600_000],
      stuckAfterMs: 1_000,
    });
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
    clock.advance(1_000); // open for stuckAfterMs without a final state: stuck from now on
    const firstPoll = clock.now();

    const once = await store.claims.recordPoll('R1');
    clock.advance(60_000);
    const twice = await store.claims.recordPoll('R1');

    assert.deepEqual([once.pollCount, once.lastPolledAt, once.stuckAt], [1, firstPoll, firstPoll]);
    assert.equal(once.nextPollAt, firstPoll + 3_600_000, 'a stuck order is polled at the longest interval');
    assert.deepEqual([twice.pollCount, twice.lastPolledAt, twice.stuckAt], [2, clock.now(), firstPoll]);
    assert.equal(twice.nextPollAt, clock.now() + 3_600_000);
  });

  test('polls that change nothing back off through backoffMs, the last repeating; a poll that changes the order starts over', async (t) => {
    const { store, clock } = await backend.tempStore(t, {
      firstPollDelayMs: 500,
      backoffMs: [1_000, 2_000, 5_000],
    });
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
    const delays: number[] = [];
    const poll = async (changed: boolean) => {
      clock.advance((await store.queries.getOrder('R1'))!.nextPollAt! - clock.now());
      const order = await store.claims.recordPoll('R1', { changed });
      delays.push(order.nextPollAt! - clock.now());
      return order;
    };

    for (let i = 0; i < 4; i++) await poll(false);
    const changed = await poll(true);
    await poll(false);

    assert.deepEqual(delays, [1_000, 2_000, 5_000, 5_000, 500, 1_000]);
    assert.equal(changed.pollCount, 0, 'the count restarts with the change');
  });

  test('a failed poll puts the order on its own backoff without counting as an answer', async (t) => {
    const { store, clock } = await backend.tempStore(t, { firstPollDelayMs: 500, backoffMs: [1_000, 2_000] });
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
    clock.advance(500);
    const answered = await store.claims.recordPoll('R1');
    clock.advance(1_000);

    const failed = await store.claims.recordFailedPoll('R1');

    assert.equal(failed.lastPolledAt, answered.lastPolledAt, 'the last answer stays the last poll');
    assert.equal(failed.pollCount, 2);
    assert.equal(failed.nextPollAt, clock.now() + 2_000, 'the next backoff interval');
    assert.equal(
      (await store.claims.claimDueForPoll(1)).length,
      0,
      'and its lease ended: nothing is due yet',
    );
  });

  test('recording a poll after its answer settled the order does not schedule another', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
    await store.writer.applyOrderSnapshot(snapshot('R1', 'FAILED'), { source: 'poll' });

    const order = await store.claims.recordPoll('R1');

    assert.equal(order.nextPollAt, null);
    assert.equal(order.pollCount, 1);
  });

  test('a schedule that cannot work is refused when the store is opened, naming the setting', async (t) => {
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
      await assert.rejects(() => backend.tempStore(t, settings), { name: 'RangeError', message });
    }
  });

  test('the audit claims settled SUCCESS orders of its window, least recently checked first, each once per auditEveryMs, and none when the window is 0', async (t) => {
    const DAY = 86_400_000;
    const { store, clock } = await backend.tempStore(t, { auditWindowMs: 3 * DAY, auditEveryMs: DAY });
    const success = async (ref: string) =>
      await store.writer.applyOrderSnapshot(snapshot(ref, 'SUCCESS', { serial_number: `SN-${ref}` }), {
        source: 'webhook',
      });
    const claimAll = async (claims = store.claims, options?: { checkedBefore?: number }) => {
      const claimed: string[] = [];
      for (let o = await claims.claimForAudit(options); o; o = await claims.claimForAudit(options)) {
        claimed.push(o.partnerRef);
        await claims.recordPoll(o.partnerRef);
      }
      return claimed;
    };
    await success('A'); // final at t0
    clock.advance(DAY / 2);
    await success('B'); // final at t0 + 12 h
    await store.writer.applyOrderSnapshot(snapshot('OPEN', 'PENDING'), { source: 'create' });
    await store.writer.applyOrderSnapshot(snapshot('FAILED', 'FAILED'), { source: 'create' });

    clock.advance(DAY / 2);
    assert.deepEqual(await claimAll(), ['A'], 't0 + 24 h: only A was checked a day ago');
    clock.advance(DAY / 2);
    assert.deepEqual(await claimAll(), ['B'], 't0 + 36 h: B, not A (read 12 h ago)');
    clock.advance(1.5 * DAY);
    assert.deepEqual(await claimAll(), ['A', 'B'], 't0 + 72 h: the least recently checked first');
    clock.advance(DAY);
    assert.deepEqual(await claimAll(), [], 't0 + 96 h: both have left the three-day window');

    const often = withClaims(store, scheduleSettings({ auditWindowMs: 10 * DAY, auditEveryMs: 1 }));
    const passStart = clock.now();
    clock.advance(1000);
    assert.deepEqual(await claimAll(often.claims, { checkedBefore: passStart }), ['A', 'B']);
    clock.advance(1000);
    assert.deepEqual(
      await claimAll(often.claims, { checkedBefore: passStart }),
      [],
      'none twice in one pass, however short auditEveryMs',
    );
    const off = withClaims(store, scheduleSettings({ auditWindowMs: 0 }));
    clock.advance(10 * DAY);
    assert.equal(await off.claims.claimForAudit(), undefined);
  });
});

describeEachBackend('claims', (backend) => {
  /** A second store on `url`, as another process, on the same clock, lease and first-poll delay. */
  const otherProcess = (t: Parameters<typeof backend.open>[0], url: string, now: () => number) =>
    backend.open(t, url, { now, leaseMs: 1_000, firstPollDelayMs: 0 });

  test('a claim that ran out and was taken by another is not ended by its first holder’s release or poll records', async (t) => {
    const { store, url, clock } = await backend.tempStore(t, { leaseMs: 1_000, firstPollDelayMs: 0 });
    const other = await otherProcess(t, url, clock.now);
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
    const [first] = await store.claims.claimDueForPoll(1);
    clock.advance(1_000);
    const [second] = await other.claims.claimDueForPoll(1);
    assert.equal(second?.partnerRef, 'R1', 'the lease ran out: another process claims the order');
    const takenByNobodyElse = async () => (await store.claims.claimOrder('R1'))?.claimed === false;

    await store.claims.releaseClaim('R1', first!.claim);
    assert.ok(await takenByNobodyElse(), 'the first holder’s release left the new claim');
    await store.claims.recordPoll('R1', { claim: first!.claim });
    assert.ok(await takenByNobodyElse(), 'so did its poll record');
    await store.claims.recordFailedPoll('R1', { claim: first!.claim });
    assert.ok(await takenByNobodyElse(), 'and its failed poll record');

    await other.claims.recordPoll('R1', { claim: second!.claim });
    assert.equal((await store.claims.claimOrder('R1'))?.claimed, true, 'the holder’s own record ends it');
  });

  test('only a claim’s live holder renews it or marks its create as sent', async (t) => {
    const { store, url, clock } = await backend.tempStore(t, { leaseMs: 1_000 });
    const other = await otherProcess(t, url, clock.now);
    await store.writer.createLocalOrder({ partnerRef: 'Q1', productCode: 'ML86', data: DATA, queued: true });
    const first = await store.claims.claimNextQueued();
    clock.advance(1_000);
    assert.equal(
      await store.writer.startSubmission('Q1', first!.claim, { leaseMs: store.claims.settings.leaseMs }),
      undefined,
      'not once it ran out',
    );
    const second = await other.claims.claimNextQueued();
    assert.equal(second?.partnerRef, 'Q1');

    assert.equal(await store.claims.renewClaim('Q1', first!.claim), undefined);
    assert.equal(
      await store.writer.startSubmission('Q1', first!.claim, { leaseMs: store.claims.settings.leaseMs }),
      undefined,
    );
    clock.advance(500);
    assert.equal(await other.claims.renewClaim('Q1', second!.claim), clock.now() + 1_000);
    const started = await other.writer.startSubmission('Q1', second!.claim, {
      leaseMs: other.claims.settings.leaseMs,
    });
    assert.equal(started?.leasedUntil, clock.now() + 1_000, 'the start renews the lease too');
    assert.equal(started?.order.submissionState, 'queued');
  });

  test('a dead holder’s claim runs out at its leasedUntil, 45 s after the claim with the default settings; then another process claims it', async (t) => {
    const { store, url, clock } = await backend.tempStore(t);
    const other = await backend.open(t, url, { now: clock.now });
    assert.equal(store.claims.settings.leaseMs, 45_000, 'RECONCILE_LEASE_S defaults to 45');
    await store.writer.createLocalOrder({ partnerRef: 'Q1', productCode: 'ML86', data: DATA, queued: true });
    const dead = await store.claims.claimNextQueued();
    assert.equal(dead?.leasedUntil, clock.now() + 45_000);

    clock.advance(44_999);
    assert.equal(await other.claims.claimNextQueued(), undefined, 'held until its leasedUntil');
    clock.advance(1);
    const taken = await other.claims.claimNextQueued();
    assert.equal(taken?.partnerRef, 'Q1');
    assert.notEqual(taken?.claim, dead?.claim);
  });
});
