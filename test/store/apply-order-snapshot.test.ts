import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ALLOWED_TRANSITIONS } from '../../src/domain/state-machine.js';
import { StoreError } from '../../src/store/store-error.js';
import { ORDER_STATUSES, type Order } from '../../src/upstream/model.js';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const DATA = { user_id: '12345678', server_id: '2001' };

describeEachBackend('applying an order snapshot', (backend) => {
  test('the create answer gives a pending local order its first status and accepts the submission', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.createLocalOrder({ partnerRef: 'R1', productCode: 'ML86', data: DATA });

    const result = await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });

    assert.equal(result.changed, true);
    assert.equal(result.reason, 'initial');
    assert.equal(result.created, false);
    assert.equal(result.order.status, 'PENDING');
    assert.equal(result.order.submissionState, 'accepted');
    assert.equal(result.order.invoiceNumber, 'INV-R1');
    assert.equal(result.order.amount, 15_000);
    assert.deepEqual(result.order.data, DATA);
    assert.deepEqual(
      (await store.queries.listEvents('R1')).map((e) => [e.source, e.status, e.changed, e.reason]),
      [['create', 'PENDING', true, 'initial']],
    );
  });

  test("two upstreams may issue the same invoice number: each names its own upstream's order", async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('on-default', 'PROCESSING', { invoice_number: 'INV-1' }), {
      source: 'create',
    });

    // beta's webhook of an order of its own, numbered alike: a new order, not the default one's.
    const beta = await store.writer.applyOrderSnapshot(
      snapshot('on-beta', 'PROCESSING', { invoice_number: 'INV-1' }),
      { source: 'webhook', eventId: 'e1', upstream: 'beta' },
    );
    // Then its SUCCESS, named by the invoice number alone.
    const done = await store.writer.applyOrderSnapshot(
      {
        ...snapshot('on-beta', 'SUCCESS', { invoice_number: 'INV-1', serial_number: 'SN' }),
        partner_ref: null,
      } as unknown as Order,
      { source: 'webhook', eventId: 'e2', upstream: 'beta' },
    );

    assert.equal(beta.created, true);
    assert.equal(beta.order.upstream, 'beta');
    assert.equal(done.order.partnerRef, 'on-beta');
    assert.equal(done.order.status, 'SUCCESS');
    assert.equal((await store.queries.getOrder('on-default'))?.status, 'PROCESSING');
  });

  test('every allowed transition of decisions.md moves the order and records an event', async (t) => {
    const { store } = await backend.tempStore(t);
    for (const from of ORDER_STATUSES) {
      for (const to of ALLOWED_TRANSITIONS[from]) {
        const ref = `${from}-${to}`;
        await store.writer.applyOrderSnapshot(snapshot(ref, from), { source: 'poll' });

        const result = await store.writer.applyOrderSnapshot(snapshot(ref, to), {
          source: 'webhook',
          eventId: ref,
        });

        assert.equal(result.changed, true, ref);
        assert.equal(result.reason, 'transition', ref);
        assert.equal(result.order.status, to, ref);
        assert.equal(result.order.upstreamStatus, to, ref);
        const last = (await store.queries.listEvents(ref)).at(-1)!;
        assert.deepEqual([last.source, last.eventId, last.status, last.changed], ['webhook', ref, to, true]);
      }
    }
  });

  test('a regression is recorded with changed=0 and its reason, and leaves the order as it was', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const cases: Array<[string, Order, Order]> = [
      ['SUCCESS then PENDING', snapshot('A', 'SUCCESS', { serial_number: 'SN-A' }), snapshot('A', 'PENDING')],
      ['FAILED after SUCCESS', snapshot('B', 'SUCCESS', { serial_number: 'SN-B' }), snapshot('B', 'FAILED')],
      ['PROCESSING after FAILED', snapshot('C', 'FAILED'), snapshot('C', 'PROCESSING')],
      [
        'SUCCESS after REFUNDED',
        snapshot('D', 'REFUNDED', { serial_number: 'SN-D' }),
        snapshot('D', 'SUCCESS'),
      ],
    ];
    for (const [name, settled, late] of cases) {
      const before = (
        await store.writer.applyOrderSnapshot(settled, {
          source: 'webhook',
          eventId: `${name}-1`,
        })
      ).order;
      clock.advance(60_000);

      const result = await store.writer.applyOrderSnapshot(late, { source: 'webhook', eventId: `${name}-2` });

      assert.equal(result.changed, false, name);
      assert.equal(result.reason, 'not_allowed', name);
      assert.deepEqual(result.order, before, name);
      assert.deepEqual(await store.queries.getOrder(settled.partner_ref), before, name);
      const last = (await store.queries.listEvents(settled.partner_ref)).at(-1)!;
      assert.deepEqual([last.status, last.changed, last.reason], [late.status, false, 'not_allowed'], name);
    }
  });

  test('a refund that overtakes its SUCCESS webhook moves the order on, and the late SUCCESS changes nothing', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PROCESSING'), { source: 'webhook', eventId: 'e1' });

    const refund = await store.writer.applyOrderSnapshot(
      snapshot('R1', 'REFUNDED', { serial_number: 'SN-1' }),
      {
        source: 'webhook',
        eventId: 'e3',
      },
    );
    const late = await store.writer.applyOrderSnapshot(snapshot('R1', 'SUCCESS', { serial_number: 'SN-1' }), {
      source: 'webhook',
      eventId: 'e2',
    });

    assert.deepEqual([refund.changed, refund.reason, refund.order.status], [true, 'transition', 'REFUNDED']);
    assert.equal(refund.order.successAt, '2026-11-01T00:01:00.000Z');
    assert.equal(refund.order.serialNumber, 'SN-1');
    assert.deepEqual([late.changed, late.reason], [false, 'not_allowed']);
    assert.deepEqual(late.order, refund.order);
  });

  test('the same status again is recorded as a duplicate and changes nothing', async (t) => {
    const { store } = await backend.tempStore(t);
    const first = await store.writer.applyOrderSnapshot(snapshot('R1', 'PROCESSING'), {
      source: 'webhook',
      eventId: 'e1',
    });

    const again = await store.writer.applyOrderSnapshot(snapshot('R1', 'PROCESSING'), { source: 'poll' });

    assert.deepEqual([again.changed, again.reason, again.duplicate], [false, 'duplicate', false]);
    assert.deepEqual(again.order, first.order);
    assert.equal((await store.queries.listEvents('R1')).length, 2);
  });

  test('SUCCESS then SUCCESS with a serial number adds the serial', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('R1', 'SUCCESS'), { source: 'webhook', eventId: 'e1' });

    const result = await store.writer.applyOrderSnapshot(
      snapshot('R1', 'SUCCESS', { serial_number: 'SN-9' }),
      {
        source: 'webhook',
        eventId: 'e2',
      },
    );

    assert.deepEqual([result.changed, result.reason], [true, 'serial_added']);
    assert.equal(result.order.serialNumber, 'SN-9');
    assert.equal(result.order.successAt, '2026-11-01T00:01:00.000Z');
  });

  test('a snapshot that lacks a known serial or nickname does not erase it', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('R1', 'SUCCESS', { serial_number: 'SN-1' }), {
      source: 'poll',
    });

    const result = await store.writer.applyOrderSnapshot(
      snapshot('R1', 'REFUNDED', { serial_number: null, nickname: null }),
      {
        source: 'poll',
      },
    );

    assert.equal(result.order.status, 'REFUNDED');
    assert.equal(result.order.serialNumber, 'SN-1');
    assert.equal(result.order.nickname, 'PlayerOne');
    assert.equal(result.order.message, 'refunded by provider');
  });

  test('a repeated webhook event id records nothing new and reports a duplicate', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'webhook', eventId: 'evt-1' });
    const first = await store.writer.applyOrderSnapshot(snapshot('R1', 'PROCESSING'), {
      source: 'webhook',
      eventId: 'evt-2',
    });

    // The same event id, even carrying another state, is the same delivery retried.
    const repeat = await store.writer.applyOrderSnapshot(snapshot('R1', 'SUCCESS'), {
      source: 'webhook',
      eventId: 'evt-2',
    });

    assert.deepEqual(
      [repeat.duplicate, repeat.changed, repeat.reason, repeat.created],
      [true, false, 'duplicate_event', false],
    );
    assert.deepEqual(repeat.order, first.order);
    assert.equal((await store.queries.listEvents('R1')).length, 2);
  });

  test('the same event id from another source is a different event', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'webhook', eventId: 'k1' });

    const result = await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), {
      source: 'manual',
      eventId: 'k1',
    });

    assert.equal(result.duplicate, false);
    assert.equal((await store.queries.listEvents('R1')).length, 2);
  });

  test('an unknown status string is kept in upstream_status, the status stays, and the order stays due for polling', async (t) => {
    const { store, clock } = await backend.tempStore(t, { firstPollDelayMs: 30_000 });
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
    clock.advance(5_000);

    const result = await store.writer.applyOrderSnapshot(snapshot('R1', 'ON_HOLD'), {
      source: 'webhook',
      eventId: 'e1',
    });

    assert.deepEqual([result.changed, result.reason], [false, 'unknown_status']);
    assert.equal(result.order.status, 'PENDING');
    assert.equal(result.order.upstreamStatus, 'ON_HOLD');
    assert.notEqual(result.order.nextPollAt, null);
    clock.advance(25_000);
    assert.deepEqual(
      (await store.claims.dueForPoll(10)).map((o) => o.partnerRef),
      ['R1'],
    );
    assert.equal((await store.queries.listEvents('R1')).at(-1)!.status, 'ON_HOLD');
    // A known status later moves the order on as usual.
    assert.equal(
      (await store.writer.applyOrderSnapshot(snapshot('R1', 'SUCCESS'), { source: 'poll' })).order.status,
      'SUCCESS',
    );
  });

  test('an unknown status as the first news of an order creates it with no status, still to be polled', async (t) => {
    const { store } = await backend.tempStore(t);

    const result = await store.writer.applyOrderSnapshot(snapshot('R1', 'QUEUED'), {
      source: 'webhook',
      eventId: 'e1',
    });

    assert.deepEqual([result.created, result.reason, result.order.status], [true, 'unknown_status', null]);
    assert.equal(result.order.upstreamStatus, 'QUEUED');
    assert.equal(result.order.invoiceNumber, 'INV-R1');
    assert.notEqual(result.order.nextPollAt, null);
  });

  test('a snapshot for an order unknown locally creates it as accepted, placed elsewhere', async (t) => {
    const { store } = await backend.tempStore(t);

    const result = await store.writer.applyOrderSnapshot(snapshot('ELSEWHERE', 'PROCESSING'), {
      source: 'webhook',
      eventId: 'e1',
    });

    assert.deepEqual([result.created, result.changed, result.reason], [true, true, 'initial']);
    assert.equal(result.order.status, 'PROCESSING');
    assert.equal(result.order.submissionState, 'accepted');
    assert.equal(result.order.data, null);
    assert.deepEqual(await store.queries.getOrder('INV-ELSEWHERE'), result.order);
  });

  test('a webhook that beats the create answer is applied, and the late create answer changes nothing', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.createLocalOrder({ partnerRef: 'R1', productCode: 'ML86', data: DATA });
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PROCESSING'), { source: 'webhook', eventId: 'e1' });

    const late = await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });

    assert.deepEqual([late.changed, late.reason, late.created], [false, 'not_allowed', false]);
    assert.equal(late.order.status, 'PROCESSING');
    assert.deepEqual(late.order.data, DATA);
  });

  test('a snapshot without partner_ref finds its order by invoice number', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });

    const result = await store.writer.applyOrderSnapshot(
      { ...snapshot('R1', 'FAILED'), partner_ref: '' },
      { source: 'webhook', eventId: 'e1' },
    );

    assert.equal(result.order.partnerRef, 'R1');
    assert.equal(result.order.status, 'FAILED');
  });

  test('a snapshot with no status, or with no reference, is refused as permanently invalid', async (t) => {
    const { store } = await backend.tempStore(t);
    const invalid = [
      { ...snapshot('R1', 'PENDING'), status: undefined } as unknown as Order,
      { ...snapshot('R1', 'PENDING'), partner_ref: '', invoice_number: '' },
      { ...snapshot('R2', 'PENDING'), partner_ref: '' },
    ];
    for (const s of invalid) {
      await assert.rejects(
        () => store.writer.applyOrderSnapshot(s, { source: 'webhook', eventId: 'bad' }),
        (error: unknown) => error instanceof StoreError && error.code === 'INVALID_SNAPSHOT',
      );
    }
    assert.deepEqual(await store.queries.listOrders(), []);
  });

  test('the audit trail keeps the payload given, the receive time and the apply time', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const body = { event_id: 'e1', event: 'order.updated', data: snapshot('R1', 'PENDING') };
    const receivedAt = clock.now() - 1_000;

    await store.writer.applyOrderSnapshot(body.data, {
      source: 'webhook',
      eventId: 'e1',
      payload: body,
      receivedAt,
    });

    const [event] = await store.queries.listEvents('R1');
    assert.deepEqual(event!.payload, body);
    assert.equal(event!.receivedAt, receivedAt);
    assert.equal(event!.appliedAt, clock.now());
  });

  test('a final state is never left, whatever arrives after it', async (t) => {
    const { store } = await backend.tempStore(t);
    for (const final of ['FAILED', 'REFUNDED'] as const) {
      const ref = `R-${final}`;
      const settled = await store.writer.applyOrderSnapshot(snapshot(ref, final, { serial_number: 'SN' }), {
        source: 'poll',
      });
      for (const later of [...ORDER_STATUSES, 'ON_HOLD']) {
        await store.writer.applyOrderSnapshot(snapshot(ref, later, { serial_number: 'SN-other' }), {
          source: 'poll',
        });
      }
      assert.deepEqual((await store.queries.getOrder(ref))!.status, final);
      // Only the unknown status is kept (upstream_status), which readers of the feed see: one
      // change, one version more.
      assert.deepEqual(
        { ...(await store.queries.getOrder(ref))!, upstreamStatus: null, version: 0 },
        { ...settled.order, upstreamStatus: null, version: 0 },
      );
      assert.equal((await store.queries.getOrder(ref))!.version, settled.order.version + 1);
    }
  });
});
