// The store's parts that the API, the notifier and the catalog sync use, at store level, on every
// backend: the tokens, the notification endpoints and their delivery history, the catalog and the
// balance, the feed's reads and the order queries the API and `h2h-sync status` read. Tests of
// these parts through the API or the notifier run on SQLite only; these run their SQL on both.
import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import type { CatalogSnapshot } from '../../src/store/catalog.js';
import type { NotifyDelivery } from '../../src/store/notify-deliveries.js';
import { signingSecrets } from '../../src/store/notify-endpoints.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend, type StoreBackend } from '../helpers/store-backends.js';

const DATA = { user_id: '12345678', server_id: '2001' };
const DAY = 86_400_000;

/** A delivery attempt of `seq` at `endpointId`, with overrides. */
function attempt(
  endpointId: number,
  seq: number,
  overrides: Partial<NotifyDelivery> = {},
): Omit<NotifyDelivery, 'id'> {
  return {
    endpointId,
    seq,
    type: 'order.updated',
    partnerRef: 'R1',
    attempt: 1,
    requestedAt: 1_000,
    status: 500,
    durationMs: 12,
    error: null,
    outcome: 'retrying',
    ...overrides,
  };
}

/** A store and, as `others`, it and three more on its database, as four processes open it. */
async function fourProcesses(backend: StoreBackend, t: Pick<TestContext, 'after'>) {
  const { store, url } = await backend.tempStore(t);
  const others = [store];
  for (let i = 0; i < 3; i++) others.push(await backend.open(t, url));
  return { store, others };
}

function addEndpoint(store: OrderStore, url = 'http://127.0.0.1:9/hook') {
  return store.endpoints.add({ url, events: ['order.*'], secret: generateEndpointSecret() });
}

/** A catalog of two categories and three products, as a sync read it at `readAt`. */
function twoCategories(readAt: number, mlPrice: number): CatalogSnapshot {
  const base = catalogSnapshot({ readAt, price: mlPrice, balance: 500_000 });
  return {
    ...base,
    categories: [
      ...base.categories,
      { code: 'FF', name: 'Free Fire', sub_name: 'Garena', logo: 'ff.png', is_active: false },
    ],
    products: [
      ...base.products,
      {
        id: 'AAAAAAAA-2222-4222-8222-222222222222',
        code: 'FF100',
        name: 'FF 100',
        category_code: 'FF',
        price: 10_000,
        is_active: true,
        target: { user_id: '^[0-9]{6,12}$' },
      },
      {
        id: '33333333-3333-4333-8333-333333333333',
        code: 'ML12',
        name: 'ML 12',
        category_code: 'ML',
        price: 3_000,
        is_active: false,
      },
    ],
  };
}

describeEachBackend('the store parts of the API, notifier and catalog', (backend) => {
  test('a token authenticates until revoked; its last use is recorded at most once a minute; a wrong one is refused', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const { token, info } = await store.tokens.create('  shop  ', [
      'orders:read',
      'orders:write',
      'orders:read',
    ]);
    assert.equal(info.name, 'shop');
    assert.deepEqual(info.scopes, ['orders:read', 'orders:write']);
    await assert.rejects(
      () => store.tokens.create('x', ['orders:delete' as never]),
      /unknown: orders:delete/,
    );
    await assert.rejects(() => store.tokens.create(' ', ['orders:read']), /needs a name/);

    const first = await store.tokens.authenticate(token);
    assert.ok(first.ok);
    assert.equal(first.token.lastUsedAt, clock.now());
    const usedAt = clock.now();
    clock.advance(30_000);
    await store.tokens.authenticate(token);
    assert.equal((await store.tokens.list())[0]!.lastUsedAt, usedAt, 'not written again within a minute');
    clock.advance(30_000);
    await store.tokens.authenticate(token);
    assert.equal((await store.tokens.list())[0]!.lastUsedAt, clock.now());

    const wrongSecret = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
    assert.deepEqual(await store.tokens.authenticate(wrongSecret), { ok: false, refusal: 'unknown' });
    assert.deepEqual(await store.tokens.authenticate('h2h_nope'), { ok: false, refusal: 'malformed' });

    clock.advance(1);
    const other = await store.tokens.create('other', ['orders:read']);
    assert.deepEqual(
      (await store.tokens.list()).map((listed) => listed.name),
      ['shop', 'other'],
      'oldest first',
    );
    assert.equal(await store.tokens.revoke(info.id), true);
    assert.equal(await store.tokens.revoke(info.id), false, 'already revoked');
    assert.equal(await store.tokens.revoke('nosuchtoken0'), false);
    assert.deepEqual(await store.tokens.authenticate(token), { ok: false, refusal: 'revoked' });
    assert.ok((await store.tokens.authenticate(other.token)).ok, 'another token still works');
    const listed = await store.tokens.list();
    assert.equal(listed[0]!.revokedAt, clock.now());
    assert.ok(!JSON.stringify(listed).includes(token.slice(-43)), 'no secret is listed');
  });

  test("an endpoint added starts at the feed's newest event; a disable keeps its first reason", async (t) => {
    const { store } = await backend.tempStore(t);
    const early = await addEndpoint(store);
    assert.deepEqual([early.fromSeq, early.cursor, early.disabledAt], [0, 0, null]);
    assert.deepEqual(early.events, ['order.*']);
    await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });
    await store.writer.applyOrderSnapshot(snapshot('R2', 'PENDING'), { source: 'create' });
    const last = await store.feed.lastSeq();
    assert.ok(last >= 2);

    const late = await addEndpoint(store, 'http://127.0.0.1:9/other');
    assert.deepEqual([late.fromSeq, late.cursor], [last, last]);

    assert.equal((await store.endpoints.disable(late.id, 'gone (410)'))!.disabledReason, 'gone (410)');
    assert.equal((await store.endpoints.disable(late.id, 'by hand'))!.disabledReason, 'gone (410)');
    assert.deepEqual(
      (await store.endpoints.list()).map((e) => e.id),
      [early.id, late.id],
    );
    assert.deepEqual(
      (await store.endpoints.enabled()).map((e) => e.id),
      [early.id],
    );
    assert.equal(await store.endpoints.get(999), undefined);
    assert.equal(await store.endpoints.disable(999, 'x'), undefined);
    assert.equal(await store.endpoints.rotateSecret(999, generateEndpointSecret(), 1), undefined);

    const again = (await store.endpoints.enable(early.id))!;
    assert.deepEqual(
      [again.changed, again.missed],
      [false, null],
      'enabling an enabled endpoint changes nothing',
    );
  });

  test('of enables at once from processes of their own, one enables the endpoint and says what it missed', async (t) => {
    const { store, others } = await fourProcesses(backend, t);
    const endpoint = await addEndpoint(store);
    for (const ref of ['A', 'B', 'C']) {
      await store.endpoints.disable(endpoint.id, 'by hand');
      await store.writer.applyOrderSnapshot(snapshot(ref, 'PENDING'), { source: 'create' });
      const outcomes = await Promise.all(others.map((each) => each.endpoints.enable(endpoint.id)));
      assert.equal(outcomes.filter((o) => o?.changed).length, 1, `${ref}: enabled once`);
      assert.equal(outcomes.filter((o) => o?.missed).length, 1, `${ref}: the missed range said once`);
    }
  });

  test('rotating the secret keeps the old one signing beside the new one for the grace, then only the new one', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const endpoint = await addEndpoint(store);
    const next = generateEndpointSecret();

    const rotated = (await store.endpoints.rotateSecret(endpoint.id, next, 60_000))!;

    assert.equal(rotated.secret, next);
    assert.equal(rotated.previousSecret, endpoint.secret);
    assert.equal(rotated.previousSecretUntil, clock.now() + 60_000);
    assert.deepEqual(signingSecrets(rotated, clock.now() + 59_999), [next, endpoint.secret]);
    assert.deepEqual(signingSecrets(rotated, clock.now() + 60_000), [next]);
  });

  test('the delivery history is newest first, filtered by endpoint, time and limit; an attempt is recorded once', async (t) => {
    const { store } = await backend.tempStore(t);
    const a = await addEndpoint(store);
    const b = await addEndpoint(store, 'http://127.0.0.1:9/b');
    const r1 = await store.deliveries.record(attempt(a.id, 1, { requestedAt: 1_000 }));
    const r2 = await store.deliveries.record(
      attempt(b.id, 1, { requestedAt: 2_000, outcome: 'delivered', status: 200 }),
    );
    const r3 = await store.deliveries.record(
      attempt(a.id, 1, { attempt: 2, requestedAt: 3_000, status: null, error: 'time-out', durationMs: null }),
    );
    assert.ok(r1.id < r2.id && r2.id < r3.id);
    assert.deepEqual(await store.deliveries.history(), [r3, r2, r1]);
    assert.deepEqual(await store.deliveries.history({ endpointId: a.id }), [r3, r1]);
    assert.deepEqual(await store.deliveries.history({ since: 2_000 }), [r3, r2]);
    assert.deepEqual(await store.deliveries.history({ limit: 1 }), [r3]);
    assert.deepEqual(await store.deliveries.record(attempt(a.id, 1, { requestedAt: 1_000 })), r1, 'once');
    assert.equal((await store.deliveries.history()).length, 3);
  });

  test('failed lists the events whose latest attempt gave up, by endpoint and seq; a later delivery takes one off', async (t) => {
    const { store } = await backend.tempStore(t);
    const a = await addEndpoint(store);
    const b = await addEndpoint(store, 'http://127.0.0.1:9/b');
    await store.deliveries.record(attempt(b.id, 3, { outcome: 'gave_up', requestedAt: 1_000 }));
    await store.deliveries.record(attempt(a.id, 5, { outcome: 'gave_up', requestedAt: 2_000 }));
    await store.deliveries.record(attempt(a.id, 4, { outcome: 'gave_up', requestedAt: 3_000 }));
    await store.deliveries.record(attempt(a.id, 6, { outcome: 'retrying', requestedAt: 3_000 }));
    const key = (list: NotifyDelivery[]) => list.map((d) => [d.endpointId, d.seq]);

    assert.deepEqual(key(await store.deliveries.failed()), [
      [a.id, 4],
      [a.id, 5],
      [b.id, 3],
    ]);
    assert.deepEqual(key(await store.deliveries.failed({ endpointId: b.id })), [[b.id, 3]]);
    assert.deepEqual(key(await store.deliveries.failed({ since: 2_500 })), [[a.id, 4]]);
    assert.deepEqual(key(await store.deliveries.failed({ limit: 1 })), [[a.id, 4]]);

    await store.deliveries.record(attempt(a.id, 5, { outcome: 'delivered', attempt: 9, requestedAt: 4_000 }));
    assert.deepEqual(key(await store.deliveries.failed()), [
      [a.id, 4],
      [b.id, 3],
    ]);
  });

  test('a catalog sync replaces the catalog; a price change is one product.price_changed event; an older snapshot is skipped', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    assert.equal(await store.catalog.syncedAt(), null);
    const t0 = clock.now();
    const first = await store.catalog.applySync(twoCategories(t0, 15_000));
    assert.deepEqual(
      [first.categories, first.products, first.priceChanges, first.skipped],
      [2, 3, [], false],
    );
    assert.equal(await store.catalog.syncedAt(), t0);
    assert.deepEqual(
      (await store.catalog.categories()).map((c) => [c.code, c.is_active]),
      [
        ['FF', false],
        ['ML', true],
      ],
    );
    assert.deepEqual(
      (await store.catalog.products()).map((p) => p.code),
      ['FF100', 'ML12', 'ML86'],
      'by category, price and code',
    );
    assert.deepEqual(
      (await store.catalog.products('ML')).map((p) => [p.code, p.is_active]),
      [
        ['ML12', false],
        ['ML86', true],
      ],
    );
    assert.deepEqual((await store.catalog.find({ code: 'FF100' }))!.target, { user_id: '^[0-9]{6,12}$' });
    assert.equal(
      (await store.catalog.find({ id: 'aaaaaaaa-2222-4222-8222-222222222222' }))!.code,
      'FF100',
      'an id matches without case',
    );
    assert.equal(
      (await store.catalog.find({ code: 'NOPE', id: '33333333-3333-4333-8333-333333333333' }))!.code,
      'ML12',
    );
    assert.equal(await store.catalog.find({ code: 'NOPE' }), undefined);
    const seqBefore = await store.feed.lastSeq();

    clock.advance(60_000);
    const second = await store.catalog.applySync(
      catalogSnapshot({ readAt: t0 + 60_000, price: 16_000, balance: 500_000 }),
    );
    assert.deepEqual(
      second.priceChanges.map((c) => [c.code, c.previous_price, c.price]),
      [['ML86', 15_000, 16_000]],
    );
    const events = await store.feed.after(seqBefore);
    assert.deepEqual(
      events.map((e) => [e.type, (e.data as { code: string }).code]),
      [['product.price_changed', 'ML86']],
    );
    assert.deepEqual(
      (await store.catalog.products()).map((p) => p.code),
      ['ML86'],
      'the products the upstream no longer lists are gone',
    );

    const older = await store.catalog.applySync(twoCategories(t0 + 30_000, 15_000));
    assert.deepEqual([older.skipped, older.syncedAt, older.priceChanges], [true, t0 + 60_000, []]);
    assert.equal((await store.catalog.find({ code: 'ML86' }))!.price, 16_000);
    assert.equal(await store.feed.lastSeq(), events[0]!.seq);
  });

  test('the balance is unknown before a profile read, then debited on acceptance and credited on FAILED; balance.low once per crossing', async (t) => {
    const { store, clock } = await backend.tempStore(t, { balanceLowThreshold: 20_000 });
    assert.deepEqual(await store.balance.view(), {
      balance: null,
      profile_balance: null,
      profile_read_at: null,
      debited: 0,
      credited: 0,
      unpriced_orders: 0,
      low_threshold: 20_000,
      upstreams: [],
    });
    await store.catalog.applySync(catalogSnapshot({ readAt: clock.now(), price: 15_000, balance: 40_000 }));
    const lows = async () =>
      (await store.feed.after(0, 1000)).filter((e) => e.type === 'balance.low').map((e) => e.data);

    await store.writer.applyOrderSnapshot(snapshot('A', 'PENDING', { amount: 12_500 }), { source: 'poll' });
    await store.writer.applyOrderSnapshot(snapshot('A', 'PROCESSING', { amount: 12_500 }), {
      source: 'poll',
    });
    assert.deepEqual(
      [(await store.balance.view()).balance, (await lows()).length],
      [27_500, 0],
      'debited once, at the amount',
    );

    await store.writer.applyOrderSnapshot(snapshot('B', 'PENDING', { amount: 12_500 }), { source: 'poll' });
    const view = await store.balance.view();
    assert.deepEqual([view.balance, view.debited], [15_000, 25_000]);
    assert.deepEqual(
      await lows(),
      [await store.balance.viewOf('default')],
      'one balance.low with the balance under the threshold, which is the upstream’s',
    );
    assert.deepEqual(
      view.upstreams,
      [await store.balance.viewOf('default')],
      'the only upstream’s is the sum',
    );
    await store.writer.applyOrderSnapshot(snapshot('C', 'PENDING', { amount: 1_000 }), { source: 'poll' });
    assert.equal((await lows()).length, 1, 'not again while it stays under');

    await store.writer.applyOrderSnapshot(snapshot('A', 'FAILED', { amount: 12_500 }), { source: 'poll' });
    await store.writer.applyOrderSnapshot(snapshot('B', 'FAILED', { amount: 12_500 }), { source: 'poll' });
    assert.deepEqual(
      [(await store.balance.view()).balance, (await store.balance.view()).credited],
      [39_000, 25_000],
    );
    await store.writer.applyOrderSnapshot(snapshot('D', 'PENDING', { amount: 30_000 }), { source: 'poll' });
    assert.equal((await lows()).length, 2, 'back over the threshold and under again: a second event');
  });

  test("the feed's reads: an event by seq, an order's events in a range, events since a time, the newest seq", async (t) => {
    const { store, clock } = await backend.tempStore(t);
    assert.equal(await store.feed.lastSeq(), 0);
    const t0 = clock.now();
    await store.writer.applyOrderSnapshot(snapshot('A', 'PENDING'), { source: 'create' });
    clock.advance(1_000);
    await store.writer.applyOrderSnapshot(snapshot('B', 'PENDING'), { source: 'create' });
    await store.writer.applyOrderSnapshot(snapshot('A', 'PROCESSING'), { source: 'poll' });
    clock.advance(1_000);
    await store.writer.applyOrderSnapshot(snapshot('A', 'SUCCESS', { serial_number: 'SN' }), {
      source: 'poll',
    });
    const all = await store.feed.after(0);
    const seqs = all.map((e) => e.seq);
    assert.equal(await store.feed.lastSeq(), seqs.at(-1));

    assert.deepEqual(await store.feed.get(seqs[1]!), all[1]);
    assert.equal(all[1]!.timestamp, new Date(t0 + 1_000).toISOString());
    assert.equal(await store.feed.get(seqs.at(-1)! + 1), undefined);

    const ofA = await store.feed.ofOrder('A');
    assert.deepEqual(
      ofA.map((e) => e.type),
      ['order.submitted', 'order.updated', 'order.updated'],
    );
    assert.deepEqual(await store.feed.ofOrder('A', { after: ofA[0]!.seq, before: ofA[2]!.seq }), [ofA[1]]);
    assert.deepEqual(await store.feed.ofOrder('NOPE'), []);

    assert.deepEqual(await store.feed.since(t0 + 1_000), all.slice(1));
    assert.deepEqual(await store.feed.since(t0 + 1_000, seqs[1]!), all.slice(2));
    assert.deepEqual(await store.feed.since(t0, 0, 2), all.slice(0, 2));
  });

  test('orders page newest first by a stable cursor, filtered by status and creation time', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const t0 = clock.now();
    for (const [ref, status] of [
      ['A', 'PENDING'],
      ['B', 'SUCCESS'],
      ['C', 'PENDING'],
      ['D', 'FAILED'],
      ['E', 'PENDING'],
    ] as const) {
      await store.writer.applyOrderSnapshot(snapshot(ref, status), { source: 'poll' });
      clock.advance(1_000);
    }
    const refs = (page: Array<{ order: { partner_ref: string } }>) =>
      page.map((row) => row.order.partner_ref);

    const first = await store.queries.pageOrders({ limit: 2 });
    assert.deepEqual(refs(first), ['E', 'D', 'C'], 'one more than the limit when there is more');
    await store.writer.applyOrderSnapshot(snapshot('F', 'PENDING'), { source: 'poll' });
    const second = await store.queries.pageOrders({ limit: 2, beforeId: first[1]!.id });
    assert.deepEqual(refs(second), ['C', 'B', 'A'], 'an order added meanwhile does not shift the next page');

    assert.deepEqual(refs(await store.queries.pageOrders({ limit: 10, status: 'PENDING' })), [
      'F',
      'E',
      'C',
      'A',
    ]);
    assert.deepEqual(
      refs(await store.queries.pageOrders({ limit: 10, status: 'accepted', createdTo: t0 + 2_000 })),
      ['B', 'A'],
    );
    assert.deepEqual(
      refs(await store.queries.pageOrders({ limit: 10, createdFrom: t0 + 1_000, createdTo: t0 + 3_000 })),
      ['C', 'B'],
    );
    assert.deepEqual(refs(await store.queries.pageOrders({ limit: 10, status: 'REFUNDED' })), []);

    const public_ = await store.queries.getPublicOrder('INV-B');
    assert.equal(public_?.partner_ref, 'B');
    assert.deepEqual(await store.queries.getPublicOrderByPartnerRef('B'), public_);
    assert.equal(await store.queries.getPublicOrderByPartnerRef('INV-B'), undefined, 'by partner_ref only');
    assert.deepEqual(
      (await store.queries.listPublicOrders({ status: 'FAILED' })).map((o) => o.partner_ref),
      ['D'],
    );
  });

  test('the queue count is the orders waiting for the submission pump', async (t) => {
    const { store } = await backend.tempStore(t);
    assert.equal(await store.queries.countQueued(), 0);
    for (const ref of ['Q1', 'Q2', 'Q3']) {
      await store.writer.createLocalOrder({ partnerRef: ref, productCode: 'ML86', data: DATA, queued: true });
    }
    await store.writer.createLocalOrder({ partnerRef: 'NOW', productCode: 'ML86', data: DATA });
    assert.equal(await store.queries.countQueued(), 3);
    assert.equal((await store.claims.claimNextQueued())?.partnerRef, 'Q1');
    await store.writer.applyOrderSnapshot(snapshot('Q1', 'PENDING'), { source: 'create' });
    assert.equal(await store.queries.countQueued(), 2);
  });

  test("the audit's coverage counts the SUCCESS orders final within the window, and of them those checked within a day", async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const success = (ref: string) =>
      store.writer.applyOrderSnapshot(snapshot(ref, 'SUCCESS', { serial_number: `SN-${ref}` }), {
        source: 'poll',
      });
    await success('OUTSIDE'); // final 10 days before: outside a 7-day window
    clock.advance(7 * DAY);
    await success('POLLED'); // final 3 days before, but polled within the last day
    await success('STALE'); // final 3 days before, not checked since
    await store.writer.applyOrderSnapshot(snapshot('FAILED', 'FAILED'), { source: 'poll' });
    clock.advance(2 * DAY + 1);
    await store.claims.recordPoll('POLLED');
    clock.advance(DAY - 2);
    await success('RECENT'); // final within the day

    assert.deepEqual(await store.queries.auditCoverage(7 * DAY), { successOrders: 3, checkedLastDay: 2 });
    assert.deepEqual(await store.queries.auditCoverage(DAY), { successOrders: 1, checkedLastDay: 1 });
    assert.deepEqual(await store.queries.auditCoverage(7 * DAY, clock.now() + 30 * DAY), {
      successOrders: 0,
      checkedLastDay: 0,
    });
  });

  test('the audit trail is read after any event id, in the order applied; the last event id is where a follower starts', async (t) => {
    const { store } = await backend.tempStore(t);
    assert.equal(await store.queries.lastEventId(), 0);
    await store.writer.applyOrderSnapshot(snapshot('A', 'PENDING'), { source: 'create' });
    await store.writer.applyOrderSnapshot(snapshot('B', 'PENDING'), { source: 'create' });
    await store.writer.applyOrderSnapshot(snapshot('A', 'PENDING'), { source: 'poll' }); // a duplicate: recorded
    const all = await store.queries.eventsAfter(0);
    assert.deepEqual(
      all.map((e) => [e.partnerRef, e.source, e.changed]),
      [
        ['A', 'create', true],
        ['B', 'create', true],
        ['A', 'poll', false],
      ],
    );
    assert.equal(await store.queries.lastEventId(), all[2]!.id);
    assert.deepEqual(await store.queries.eventsAfter(all[0]!.id, 1), [all[1]]);
    assert.deepEqual(await store.queries.eventsAfter(all[2]!.id), []);
  });
});
