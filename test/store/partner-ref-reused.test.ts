// decisions.md, "Whose order is it": an answer adopts an order not yet accepted only when it is
// ours; another order under our partner_ref rejects ours with PARTNER_REF_REUSED and never lends
// it its fields.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Order } from '../../src/upstream/model.js';
import { snapshot, type TestStore } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const DATA = { user_id: '12345678', server_id: '2001' };
const HOUR = 3_600_000;

/** A local order of ML86 for {@link DATA}, claimed and its create marked sent, as a sender does. */
async function sent(store: TestStore, ref: string) {
  await store.writer.createLocalOrder({ partnerRef: ref, productCode: 'ML86', data: DATA });
  const claim = (await store.claims.claimOrder(ref))!;
  assert.ok(claim.claimed);
  assert.ok(
    await store.writer.startSubmission(ref, claim.order.claim, { leaseMs: store.claims.settings.leaseMs }),
  );
}

async function catalogNamed(store: TestStore, name: string, now: number) {
  await store.catalog.applySync({
    readAt: now,
    categories: [{ code: 'MLBB', name: 'Mobile Legends', sub_name: '', logo: '', is_active: true }],
    products: [{ id: 'p-86', code: 'ML86', name, category_code: 'MLBB', price: 15_000, is_active: true }],
    profile: { balance: 1_000_000, readAt: now },
  });
}

describeEachBackend('an answer under a reused partner_ref', (backend) => {
  test('another target rejects the order with PARTNER_REF_REUSED: none of its fields taken, its snapshot kept in the history, order.rejected on the feed, nothing debited', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    await catalogNamed(store, 'Mobile Legends 86 Diamonds', clock.now());
    await sent(store, 'order-1');
    const other: Order = snapshot('order-1', 'SUCCESS', { target: '99990001(7)', invoice_number: 'INV-OLD' });

    const applied = await store.writer.applyOrderSnapshot(other, { source: 'create' });
    assert.deepEqual([applied.changed, applied.reason], [true, 'partner_ref_reused']);
    const order = (await store.queries.getOrder('order-1'))!;
    assert.deepEqual(
      [
        order.submissionState,
        order.rejectionCode,
        order.status,
        order.invoiceNumber,
        order.target,
        order.amount,
      ],
      ['rejected', 'PARTNER_REF_REUSED', null, null, null, null],
    );
    assert.match(
      order.rejectionDetail ?? '',
      /another order under partner_ref order-1 \(invoice INV-OLD\): its target is 99990001\(7\), ours 12345678\(2001\); .*new partner_ref/,
    );
    assert.equal(order.nextPollAt, null, 'never polled');
    const history = await store.queries.listEvents('order-1');
    assert.deepEqual(history.at(-1)?.payload, other, 'the other order, for the operator');
    assert.equal(history.at(-1)?.reason, 'partner_ref_reused');
    const feed = (await store.feed.after(0, 100)).filter((e) => e.type.startsWith('order.'));
    assert.deepEqual(
      feed.map((e) => [e.type, (e.data as { rejection: { code: string } | null }).rejection?.code]),
      [['order.rejected', 'PARTNER_REF_REUSED']],
    );
    assert.equal((await store.balance.view()).debited, 0);

    // The other order's webhooks keep coming: recorded, never applied, no feed event.
    const later = await store.writer.applyOrderSnapshot(
      { ...other, status: 'REFUNDED', message: 'refunded' },
      { source: 'webhook', eventId: 'old-refund' },
    );
    assert.deepEqual([later.changed, later.reason], [false, 'partner_ref_reused']);
    assert.equal((await store.queries.getOrder('order-1'))?.status, null);
    assert.equal((await store.feed.after(0, 100)).filter((e) => e.type.startsWith('order.')).length, 1);
  });

  test("a product name other than the catalog's name of ours is another order; case and spaces are not", async (t) => {
    const { store, clock } = await backend.tempStore(t);
    await catalogNamed(store, 'Mobile Legends 86 Diamonds', clock.now());
    await sent(store, 'A');
    await sent(store, 'B');
    await store.writer.applyOrderSnapshot(
      snapshot('A', 'PENDING', { product_name: 'Free Fire 70 Diamonds' }),
      {
        source: 'create',
      },
    );
    await store.writer.applyOrderSnapshot(
      snapshot('B', 'PENDING', { product_name: 'mobile legends  86 diamonds' }),
      {
        source: 'create',
      },
    );
    assert.equal((await store.queries.getOrder('A'))?.rejectionCode, 'PARTNER_REF_REUSED');
    assert.equal((await store.queries.getOrder('B'))?.submissionState, 'accepted');
  });

  test('an order created upstream before our first create, by more than the clock-skew tolerance, is another order', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    clock.advance(HOUR);
    await sent(store, 'OLD');
    await sent(store, 'SKEWED');
    const at = (ms: number) => new Date(ms).toISOString();
    await store.writer.applyOrderSnapshot(
      snapshot('OLD', 'PENDING', { created_at: at(clock.now() - HOUR) }),
      {
        source: 'poll',
      },
    );
    await store.writer.applyOrderSnapshot(
      snapshot('SKEWED', 'PENDING', { created_at: at(clock.now() - 4 * 60_000) }),
      { source: 'poll' },
    );
    const old = await store.queries.getOrder('OLD');
    assert.equal(old?.rejectionCode, 'PARTNER_REF_REUSED');
    assert.match(old?.rejectionDetail ?? '', /it was created at .*, before our first create/);
    assert.equal(
      (await store.queries.getOrder('SKEWED'))?.submissionState,
      'accepted',
      'within 5 minutes of skew',
    );
  });

  test('a webhook for an order still waiting in the submission queue, never sent, is another order', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.createLocalOrder({ partnerRef: 'Q', productCode: 'ML86', data: DATA, queued: true });
    const applied = await store.writer.applyOrderSnapshot(snapshot('Q', 'SUCCESS'), {
      source: 'webhook',
      eventId: 'w-1',
    });
    assert.equal(applied.reason, 'partner_ref_reused');
    const order = await store.queries.getOrder('Q');
    assert.deepEqual([order?.submissionState, order?.rejectionCode], ['rejected', 'PARTNER_REF_REUSED']);
    assert.equal(await store.claims.claimNextQueued(), undefined, 'never sent');
  });

  test('an answer of ours adopts the order: our target, with a nickname after it, and no product name to compare', async (t) => {
    const { store } = await backend.tempStore(t);
    await sent(store, 'MINE');
    await store.writer.applyOrderSnapshot(
      snapshot('MINE', 'PENDING', { target: '12345678 (2001) - PlayerOne' }),
      {
        source: 'create',
      },
    );
    const order = await store.queries.getOrder('MINE');
    assert.deepEqual([order?.submissionState, order?.invoiceNumber], ['accepted', 'INV-MINE']);
  });
});
