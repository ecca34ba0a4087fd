import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { OrderStore } from '../../src/store/order-store.js';
import { orderEvents, rewindToSchema22, snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';
import { waitFor } from '../helpers/wait.js';

const DATA = { user_id: '12345678', server_id: '2001' };

/** The feed's events of one order, as (type, previous_status, status, version). */
async function eventsOf(store: OrderStore, ref: string) {
  return orderEvents(await store.feed.after(0, 1000))
    .filter((e) => e.data.partner_ref === ref)
    .map((e) => [e.type, e.previous_status, e.data.status, e.data.version]);
}

describeEachBackend('the change feed', (backend) => {
  test("an order's life is in the feed, one event per change, each with the whole order at its version", async (t) => {
    const { store, clock } = await backend.tempStore(t);
    await store.writer.createLocalOrder({ partnerRef: 'R1', productCode: 'ML86', data: DATA });
    assert.deepEqual(await store.feed.after(0), [], 'an order not yet submitted has no event');

    const steps: Array<[string, Record<string, unknown>, string]> = [
      ['PENDING', {}, 'create'],
      ['PROCESSING', {}, 'webhook'],
      ['PROCESSING', {}, 'webhook'], // a duplicate: no change, no event
      ['SUCCESS', {}, 'webhook'],
      ['SUCCESS', { serial_number: 'SN-1' }, 'poll'],
      ['REFUNDED', { serial_number: 'SN-1' }, 'webhook'],
    ];
    for (const [i, [status, extra, source]] of steps.entries()) {
      clock.advance(1000);
      await store.writer.applyOrderSnapshot(snapshot('R1', status, extra), {
        source: source as 'create' | 'webhook' | 'poll',
        eventId: source === 'webhook' ? `evt-${status}` : undefined,
      });
      const last = (await store.feed.after(0, 1000)).at(-1)!;
      assert.deepEqual(
        last.data,
        await store.queries.getPublicOrder('R1'),
        `after step ${i}, the last event is the order`,
      );
    }
    assert.deepEqual(await eventsOf(store, 'R1'), [
      ['order.submitted', null, 'PENDING', 1],
      ['order.updated', 'PENDING', 'PROCESSING', 2],
      ['order.updated', 'PROCESSING', 'SUCCESS', 3],
      ['order.updated', 'SUCCESS', 'SUCCESS', 4],
      ['order.updated', 'SUCCESS', 'REFUNDED', 5],
    ]);
    const events = orderEvents(await store.feed.after(0));
    assert.equal(events[3]!.data.serial_number, 'SN-1');
    assert.deepEqual(
      (await store.feed.after(events[1]!.seq, 2)).map((e) => e.seq),
      [events[2]!.seq, events[3]!.seq],
    );
    assert.equal(await store.feed.lastSeq(), events.at(-1)!.seq);
    assert.equal(events[0]!.data.data?.user_id, '12345678', 'the target data sent is in the order');
    assert.equal(events[0]!.timestamp, new Date(Date.UTC(2026, 10, 1) + 1000).toISOString());
  });

  test('create outcomes are events: rejected, blocked, unknown, and a blocked order accepted later is submitted', async (t) => {
    const { store } = await backend.tempStore(t);
    for (const ref of ['REJ', 'BLK', 'UNK'])
      await store.writer.createLocalOrder({ partnerRef: ref, data: DATA });
    await store.writer.markRejected('REJ', 'INVALID_TARGET', 'user_id must be 8 digits');
    await store.writer.markBlocked('BLK', 'IP_NOT_WHITELISTED', '203.0.113.7');
    await store.writer.markSubmissionUnknown('UNK');
    await store.writer.markRejected('REJ', 'INVALID_TARGET', 'again'); // settled: no change, no event
    await store.writer.applyOrderSnapshot(snapshot('BLK', 'PENDING'), { source: 'create' });

    assert.deepEqual(await eventsOf(store, 'REJ'), [['order.rejected', null, null, 1]]);
    assert.deepEqual(await eventsOf(store, 'BLK'), [
      ['order.blocked', null, null, 1],
      ['order.submitted', null, 'PENDING', 2],
    ]);
    assert.deepEqual(await eventsOf(store, 'UNK'), [['order.updated', null, null, 1]]);
    const rejected = (await store.feed.after(0)).find((e) => e.type === 'order.rejected')!;
    assert.deepEqual(rejected.data.rejection, { code: 'INVALID_TARGET', detail: 'user_id must be 8 digits' });
    assert.equal(rejected.data.submission, 'rejected');
    const blocked = (await store.feed.after(0)).find((e) => e.type === 'order.blocked')!;
    assert.deepEqual(blocked.data.blocked, { code: 'IP_NOT_WHITELISTED', detail: '203.0.113.7' });
  });

  test("each order event carries previous_status, its own order's status just before that change, kept when the earlier events are pruned; other events carry none", async (t) => {
    const { store, clock } = await backend.tempStore(t);
    // Two orders interleaved: A placed here, B known first from a webhook; ON_HOLD is outside
    // decisions.md's table (upstream_status changes, status stays).
    const steps: Array<[string, string]> = [
      ['A', 'PENDING'],
      ['B', 'PROCESSING'],
      ['A', 'PROCESSING'],
      ['A', 'ON_HOLD'],
      ['B', 'SUCCESS'],
      ['A', 'FAILED'],
      ['B', 'REFUNDED'],
    ];
    await store.writer.createLocalOrder({ partnerRef: 'A', productCode: 'ML86', data: DATA });
    for (const [i, [ref, status]] of steps.entries()) {
      clock.advance(1000);
      await store.writer.applyOrderSnapshot(snapshot(ref, status), { source: 'webhook', eventId: `e${i}` });
    }
    const asRead = async () =>
      orderEvents(await store.feed.after(0, 1000)).map((e) => [
        e.data.partner_ref,
        e.type,
        e.previous_status,
        e.data.status,
      ]);
    const expected = [
      ['A', 'order.submitted', null, 'PENDING'],
      ['B', 'order.submitted', null, 'PROCESSING'],
      ['A', 'order.updated', 'PENDING', 'PROCESSING'],
      ['A', 'order.updated', 'PROCESSING', 'PROCESSING'],
      ['B', 'order.updated', 'PROCESSING', 'SUCCESS'],
      ['A', 'order.updated', 'PROCESSING', 'FAILED'],
      ['B', 'order.updated', 'SUCCESS', 'REFUNDED'],
    ];
    assert.deepEqual(await asRead(), expected);

    // Only the last two are kept: each still says what its order was before it.
    assert.equal(await store.feed.prune(1500), 5);
    assert.deepEqual(await asRead(), expected.slice(5));

    await store.db.write(
      async (tx) => store.feed.appendOther(tx, 'balance.low', await store.balance.view(), clock.now()),
      { feed: true },
    );
    const low = (await store.feed.after(0, 1000)).at(-1)!;
    assert.equal(low.type, 'balance.low');
    assert.equal('previous_status' in low, false, 'an event of no order has no previous_status');
  });

  test('migration 18 keeps the events written before it, whose previous_status reads null; the events after it record theirs', async (t) => {
    const { store, url } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('M1', 'PENDING'), { source: 'create' });
    await store.writer.applyOrderSnapshot(snapshot('M1', 'PROCESSING'), { source: 'webhook', eventId: 'm1' });
    // The store as schema 17 left it: no previous_status column (nor what 19 to 23 add), version 17.
    await store.db.write(async (tx) => {
      await rewindToSchema22(tx);
      await tx.exec('DROP INDEX IF EXISTS orders_invoice_upstream');
      await tx.exec('ALTER TABLE orders DROP COLUMN upstream');
      await tx.exec('ALTER TABLE feed_events DROP COLUMN previous_status');
      await tx.exec('ALTER TABLE order_events DROP COLUMN occurred_at');
      await tx.exec('DROP TABLE poll_plans');
      await tx.exec(tx.dialect.setSchemaVersionSql(17));
    });
    await store.close();

    const reopened = await backend.open(t, url);
    await reopened.writer.applyOrderSnapshot(snapshot('M1', 'SUCCESS'), { source: 'webhook', eventId: 'm2' });
    assert.deepEqual(await eventsOf(reopened, 'M1'), [
      ['order.submitted', null, 'PENDING', 1],
      ['order.updated', null, 'PROCESSING', 2],
      ['order.updated', 'PROCESSING', 'SUCCESS', 3],
    ]);
  });

  test("whatever arrives in whatever order, each order's last event is the order itself and its versions count up by one", async (t) => {
    const { store } = await backend.tempStore(t);
    const STATUSES = ['PENDING', 'PROCESSING', 'SUCCESS', 'FAILED', 'REFUNDED', 'ON_HOLD'];
    const step = fc.record({
      ref: fc.constantFrom('A', 'B', 'C'),
      status: fc.constantFrom(...STATUSES),
      serial: fc.option(fc.constantFrom('SN-1', 'SN-2'), { nil: null }),
      source: fc.constantFrom('webhook', 'poll', 'create'),
      event: fc.integer({ min: 0, max: 5 }),
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 25 }), async (steps) => {
        run += 1;
        for (const s of steps) {
          const ref = `${s.ref}${run}`;
          await store.writer.applyOrderSnapshot(snapshot(ref, s.status, { serial_number: s.serial }), {
            source: s.source as 'webhook' | 'poll' | 'create',
            eventId: s.source === 'webhook' ? `${ref}-${s.event}` : undefined,
          });
        }
        const all = orderEvents(await store.feed.after(0, 1000));
        for (const ref of new Set(steps.map((s) => `${s.ref}${run}`))) {
          const mine = all.filter((e) => e.data.partner_ref === ref);
          assert.deepEqual(mine.at(-1)?.data, await store.queries.getPublicOrder(ref));
          assert.deepEqual(
            mine.map((e) => e.data.version),
            mine.map((_, i) => i + 1),
          );
        }
        assert.deepEqual(
          all.map((e) => e.seq),
          [...all.map((e) => e.seq)].sort((a, b) => a - b),
        );
      }),
      { numRuns: 40, seed: 11 },
    );
  });

  test('an append that is rolled back, with its transaction or its unit of a batch, leaves no hole in the seqs', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const order = (await store.writer.applyOrderSnapshot(snapshot('H1', 'PENDING'), { source: 'create' }))
      .order;
    const publicOrder = (await store.queries.getPublicOrder('H1'))!;
    assert.equal(order.partnerRef, 'H1');
    const appendThenFail = async (tx: Parameters<Parameters<typeof store.db.write>[0]>[0]) => {
      await store.feed.append(tx, 'order.updated', publicOrder, null, clock.now());
      throw new Error('the write failed after its append');
    };
    await assert.rejects(store.db.write(appendThenFail, { feed: true }), /failed after its append/);
    const outcomes = await store.db.writeBatch([appendThenFail], { feed: true });
    assert.equal(outcomes[0]?.ok, false);
    await store.writer.applyOrderSnapshot(snapshot('H1', 'PROCESSING'), { source: 'webhook', eventId: 'h1' });
    assert.deepEqual(
      (await store.feed.after(0)).map((e) => e.seq),
      [1, 2],
      'the next change takes the next seq: a reader never sees a hole it could take for a lost event',
    );
  });

  test('a watcher of the feed is woken after a commit that appended to it: its own process’s, and on PostgreSQL another’s', async (t) => {
    const { store, url } = await backend.tempStore(t, { now: Date.now });
    const seen: number[] = [];
    const stop = await store.feed.watch(() => {
      void store.feed.lastSeq().then((seq) => seen.push(seq));
    });
    t.after(stop);
    // PostgreSQL's listener also calls once it is connected (it may have missed commits before).
    if (backend.name === 'postgres')
      await waitFor(() => seen.length >= 1, { message: 'the listener connected' });
    await store.writer.applyOrderSnapshot(snapshot('W1', 'PENDING'), { source: 'create' });
    await waitFor(() => seen.includes(1), { message: 'woken after its own commit, with the event readable' });
    if (backend.name === 'postgres') {
      const other = await backend.open(t, url);
      await other.writer.applyOrderSnapshot(snapshot('W2', 'PENDING'), { source: 'create' });
      await waitFor(() => seen.includes(2), { message: 'woken after another process’s commit' });
    }
  });

  test('events older than the retention are pruned; cursors go on from where they were', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('OLD', 'PENDING'), { source: 'create' });
    const oldSeq = await store.feed.lastSeq();
    clock.advance(31 * 86_400_000);
    await store.writer.applyOrderSnapshot(snapshot('NEW', 'PENDING'), { source: 'create' });
    assert.equal(await store.feed.prune(30 * 86_400_000), 1);
    assert.deepEqual(
      orderEvents(await store.feed.after(0)).map((e) => e.data.partner_ref),
      ['NEW'],
    );
    await store.feed.prune(0);
    await store.writer.applyOrderSnapshot(snapshot('NEWER', 'PENDING'), { source: 'create' });
    assert.ok((await store.feed.lastSeq()) > oldSeq + 1, 'a sequence number is never used twice');
    await assert.rejects(() => store.feed.after(-1), RangeError);
    await assert.rejects(() => store.feed.after(0, 1001), /limit must be a whole number from 1 to 1000/);
  });
});
