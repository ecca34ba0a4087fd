import assert from 'node:assert/strict';
import { test } from 'node:test';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

/**
 * The apply issues its statements together (docs/store-backends.md, "Round trips per apply"):
 * the order's one look-up by partner_ref or invoice number, and a failure in the middle of the
 * statements issued together.
 */
describeEachBackend('apply with statements issued together', (backend) => {
  test("an order is found by its partner_ref before another order's invoice number", async (t) => {
    const { store } = await backend.tempStore(t);
    // B's invoice number is A's partner_ref.
    await store.writer.applyOrderSnapshot(snapshot('B', 'PENDING', { invoice_number: 'A' }), {
      source: 'poll',
    });
    const { order: a } = await store.writer.applyOrderSnapshot(snapshot('A', 'PENDING'), { source: 'poll' });

    assert.equal((await store.queries.getOrder('A'))?.partnerRef, 'A');
    const moved = await store.writer.applyOrderSnapshot(snapshot('A', 'PROCESSING'), {
      source: 'webhook',
      eventId: 'a1',
    });
    assert.deepEqual([moved.order.id, moved.order.status, moved.created], [a.id, 'PROCESSING', false]);
    // Without a partner_ref, the invoice number finds B.
    const byInvoice = await store.writer.applyOrderSnapshot(
      { ...snapshot('B', 'PROCESSING', { invoice_number: 'A' }), partner_ref: '' },
      { source: 'webhook', eventId: 'b1' },
    );
    assert.deepEqual([byInvoice.order.partnerRef, byInvoice.order.status], ['B', 'PROCESSING']);
    assert.equal((await store.queries.getOrder('B'))?.status, 'PROCESSING');
  });

  test('a statement failing among those issued together fails its own item only, and leaves none of its writes', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('B', 'PENDING'), { source: 'poll' });
    await store.writer.createLocalOrder({
      partnerRef: 'A',
      data: { user_id: '12345678', server_id: '2001' },
    });
    const feedBefore = await store.feed.lastSeq();
    const eventsBefore = await store.queries.listEvents('A');

    // A's snapshot names B's invoice number: its row's UPDATE (issued after its feed event and
    // before its ledger, pace and audit statements) breaks the invoice number's uniqueness.
    const webhook = (ref: string, overrides = {}) => ({
      snapshot: snapshot(ref, 'SUCCESS', overrides),
      options: {
        source: 'webhook' as const,
        eventId: `e-${ref}`,
        occurredAt: Date.parse('2026-11-01T00:01:00.000Z'),
        receivedAt: Date.parse('2026-11-01T00:01:01.000Z'),
      },
    });
    const outcomes = await store.writer.applyBatch([
      webhook('X'),
      webhook('A', { invoice_number: 'INV-B' }),
      webhook('Z'),
    ]);

    assert.deepEqual(
      outcomes.map((o) => o.ok),
      [true, false, true],
    );
    const failed = outcomes[1] as { ok: false; error: unknown };
    assert.match(
      String((failed.error as Error).message),
      backend.uniqueViolation('orders', 'invoice_number', 'orders_invoice_upstream'),
    );
    const a = await store.queries.getOrder('A');
    assert.deepEqual([a?.status, a?.submissionState, a?.invoiceNumber], [null, 'pending', null]);
    assert.deepEqual(await store.queries.listEvents('A'), eventsBefore, 'no audit row of the failed item');
    const feed = await store.feed.after(feedBefore, 100);
    assert.deepEqual(
      feed.map((e) => (e.data as { partner_ref: string }).partner_ref),
      ['X', 'Z'],
      'no feed event of the failed item, and the seqs go on without a hole',
    );
    assert.deepEqual(
      feed.map((e) => e.seq),
      [feedBefore + 1, feedBefore + 2],
    );
    assert.deepEqual(
      [(await store.queries.getOrder('X'))?.status, (await store.queries.getOrder('Z'))?.status],
      ['SUCCESS', 'SUCCESS'],
    );
  });
});
