import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StoreError } from '../../src/store/store-error.js';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const DATA = { user_id: '12345678', server_id: '2001' };

describeEachBackend('local orders', (backend) => {
  test('a partner_ref can only exist once: creating it again returns the existing order', async (t) => {
    const { store } = await backend.tempStore(t);
    const first = await store.writer.createLocalOrder({ partnerRef: 'R1', productCode: 'ML86', data: DATA });

    const second = await store.writer.createLocalOrder({
      partnerRef: 'R1',
      productId: 'other',
      data: { user_id: '9' },
    });

    assert.equal(first.created, true);
    assert.equal(second.created, false);
    assert.deepEqual(second.order, first.order);
    assert.deepEqual(
      (await store.queries.listOrders()).map((o) => o.partnerRef),
      ['R1'],
    );
    // The database itself refuses a second row, whoever writes it.
    await assert.rejects(
      store.db.run(
        `INSERT INTO orders (partner_ref, local_created_at, updated_at, submission_state)
         VALUES ('R1', 1, 1, 'pending')`,
      ),
      backend.uniqueViolation('orders', 'partner_ref'),
    );
  });

  test('a new local order is pending, keeps what was sent, and has no status yet', async (t) => {
    const { store, clock } = await backend.tempStore(t);

    const { order } = await store.writer.createLocalOrder({
      partnerRef: 'R1',
      productCode: 'ML86',
      data: DATA,
      callbackUrl: 'https://reseller.example/hooks',
    });

    assert.equal(order.submissionState, 'pending');
    assert.equal(order.status, null);
    assert.equal(order.productCode, 'ML86');
    assert.deepEqual(order.data, DATA);
    assert.equal(order.callbackUrl, 'https://reseller.example/hooks');
    assert.equal(order.localCreatedAt, clock.now());
    assert.deepEqual(await store.queries.listEvents('R1'), []);
  });

  test('a partner_ref that is empty or longer than 64 characters is refused', async (t) => {
    const { store } = await backend.tempStore(t);
    for (const partnerRef of ['', 'x'.repeat(65)]) {
      await assert.rejects(
        () => store.writer.createLocalOrder({ partnerRef, data: DATA }),
        (error: unknown) => error instanceof StoreError && error.code === 'INVALID_PARTNER_REF',
      );
    }
    assert.equal(
      (await store.writer.createLocalOrder({ partnerRef: 'x'.repeat(64), data: DATA })).created,
      true,
    );
  });

  test('a rejected submission keeps the upstream code and detail, ends polling, and never gets a status', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.createLocalOrder({ partnerRef: 'R1', productCode: 'ML86', data: DATA });

    const order = await store.writer.markRejected('R1', 'INSUFFICIENT_BALANCE', 'balance 1000 < price 15000');

    assert.equal(order.submissionState, 'rejected');
    assert.equal(order.rejectionCode, 'INSUFFICIENT_BALANCE');
    assert.equal(order.rejectionDetail, 'balance 1000 < price 15000');
    assert.equal(order.status, null);
    assert.equal(order.nextPollAt, null);
    assert.deepEqual(await store.queries.getOrder('R1'), order);
    assert.deepEqual(
      (await store.queries.listEvents('R1')).map((e) => [e.source, e.status, e.changed, e.reason, e.payload]),
      [
        [
          'create',
          null,
          true,
          'rejected',
          { state: 'rejected', code: 'INSUFFICIENT_BALANCE', detail: 'balance 1000 < price 15000' },
        ],
      ],
    );
  });

  test('a blocked submission keeps the code and detail, is due at once, is never rejected by it, and is settled by what comes next', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    await store.writer.createLocalOrder({ partnerRef: 'B1', productCode: 'ML86', data: DATA });
    await store.writer.createLocalOrder({ partnerRef: 'B2', productCode: 'ML86', data: DATA });

    const blocked = await store.writer.markBlocked('B1', 'IP_NOT_WHITELISTED', '203.0.113.7');
    await store.writer.markBlocked('B2', 'INVALID_API_KEY', 'Unauthorized');

    assert.deepEqual(
      [blocked.submissionState, blocked.blockedCode, blocked.blockedDetail, blocked.rejectionCode],
      ['blocked', 'IP_NOT_WHITELISTED', '203.0.113.7', null],
    );
    assert.equal(blocked.nextPollAt, clock.now());
    assert.deepEqual(
      (await store.queries.listOrders({ status: 'blocked' })).map((o) => o.partnerRef).sort(),
      ['B1', 'B2'],
    );
    assert.equal((await store.queries.listEvents('B1')).at(-1)?.reason, 'blocked');

    const accepted = await store.writer.applyOrderSnapshot(snapshot('B1', 'PENDING'), { source: 'create' });
    const rejected = await store.writer.markRejected('B2', 'INSUFFICIENT_BALANCE', 'balance 0');
    assert.deepEqual(
      [accepted.order.submissionState, accepted.order.blockedCode],
      ['accepted', null],
      'a snapshot proves the upstream has it',
    );
    assert.deepEqual(
      [rejected.submissionState, rejected.blockedCode, rejected.nextPollAt],
      ['rejected', null, null],
    );
  });

  test('an unknown submission is due for a poll at once and keeps its status', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    await store.writer.createLocalOrder({ partnerRef: 'R1', productCode: 'ML86', data: DATA });

    const order = await store.writer.markSubmissionUnknown('R1');

    assert.equal(order.submissionState, 'unknown');
    assert.equal(order.status, null);
    assert.equal(order.nextPollAt, clock.now());
    assert.deepEqual(
      (await store.claims.dueForPoll(10)).map((o) => o.partnerRef),
      ['R1'],
    );
    assert.deepEqual(
      (await store.queries.listEvents('R1')).map((e) => [e.source, e.changed, e.reason]),
      [['create', true, 'submission_unknown']],
    );
  });

  test('an unknown submission is accepted when the upstream shows the order', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.createLocalOrder({ partnerRef: 'R1', productCode: 'ML86', data: DATA });
    await store.writer.markSubmissionUnknown('R1');

    const { order } = await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'poll' });

    assert.equal(order.submissionState, 'accepted');
    assert.equal(order.status, 'PENDING');
  });

  test('a create outcome that arrives after the upstream confirmed the order changes nothing', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.createLocalOrder({ partnerRef: 'R1', productCode: 'ML86', data: DATA });
    const confirmed = await store.writer.applyOrderSnapshot(snapshot('R1', 'PROCESSING'), {
      source: 'webhook',
      eventId: 'e1',
    });

    const afterTimeout = await store.writer.markSubmissionUnknown('R1');
    const afterRejection = await store.writer.markRejected('R1', 'INVALID_TARGET', 'user_id');

    assert.deepEqual(afterTimeout, confirmed.order);
    assert.deepEqual(afterRejection, confirmed.order);
    assert.deepEqual(
      (await store.queries.listEvents('R1')).map((e) => [e.changed, e.reason]),
      [
        [true, 'initial'],
        [false, 'submission_settled'],
        [false, 'submission_settled'],
      ],
    );
  });

  test("a create outcome from a sender whose claim another process took since changes nothing: the new holder's create settles the order", async (t) => {
    const { store, clock } = await backend.tempStore(t);
    await store.writer.createLocalOrder({ partnerRef: 'R1', productCode: 'ML86', data: DATA, queued: true });
    const first = (await store.claims.claimNextQueued())!;
    assert.ok(
      await store.writer.startSubmission('R1', first.claim, { leaseMs: store.claims.settings.leaseMs }),
    );
    // The first sender stalls past its lease; another claims the order and sends it.
    clock.advance(store.claims.settings.leaseMs);
    const second = (await store.claims.claimNextQueued())!;
    assert.equal(second.partnerRef, 'R1');
    assert.ok(
      await store.writer.startSubmission('R1', second.claim, { leaseMs: store.claims.settings.leaseMs }),
    );

    // The first sender's late 400 arrives: it may not reject what the second's create may place.
    const late = await store.writer.markRejected('R1', 'INVALID_PRODUCT', 'x', { claim: first.claim });
    assert.equal(late.submissionState, 'queued');
    assert.equal((await store.queries.listEvents('R1')).at(-1)?.reason, 'claim_lost');
    const settled = await store.writer.markSubmissionUnknown('R1', { claim: second.claim });
    assert.deepEqual([settled.submissionState, settled.createInDoubtAt !== null], ['unknown', true]);
    assert.deepEqual(
      (await store.feed.after(0, 10)).map((e) => e.type),
      ['order.updated'],
      'the shop never heard of the stale rejection',
    );
  });

  test('marking an order that does not exist is refused', async (t) => {
    const { store } = await backend.tempStore(t);
    await assert.rejects(
      () => store.writer.markRejected('NOPE', 'INVALID_PRODUCT', 'x'),
      (error: unknown) => error instanceof StoreError && error.code === 'ORDER_NOT_FOUND',
    );
    await assert.rejects(
      () => store.claims.recordPoll('NOPE'),
      (error: unknown) => error instanceof StoreError && error.code === 'ORDER_NOT_FOUND',
    );
  });
});
