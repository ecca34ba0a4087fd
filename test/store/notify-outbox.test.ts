import assert from 'node:assert/strict';
import { test } from 'node:test';
import { wantedTypes } from '../../src/notify/event-filter.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import type { DeliveryOutcome } from '../../src/store/notify-deliveries.js';
import type { OutboxItem, Settlement } from '../../src/store/notify-outbox.js';
import type { OpenedStore } from '../../src/store/open-store.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { liveOrder } from '../helpers/notify.js';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const LEASE_MS = 30_000;

async function endpointOf(store: OrderStore, events = ['order.*'], url = 'http://127.0.0.1:9/hook') {
  return store.endpoints.add({ url, events, secret: generateEndpointSecret() });
}

/** Fills the outbox of `endpoint` from the feed, as the notifier does. */
async function fill(store: OrderStore, endpointId: number) {
  const endpoint = (await store.endpoints.get(endpointId))!;
  return store.outbox.fill(endpoint, wantedTypes(endpoint.events));
}

/** What became of `item`: `outcome`, with its history row. */
function settled(item: OutboxItem, outcome: DeliveryOutcome, extra: { nextAt?: number } = {}): Settlement {
  const record = {
    endpointId: item.endpointId,
    seq: item.seq,
    type: item.event?.type ?? 'unknown',
    partnerRef: null,
    attempt: item.attempt,
    requestedAt: 1_000 + item.seq,
    status: outcome === 'delivered' ? 200 : outcome === 'disabled' ? 410 : 503,
    durationMs: 1,
    error: null,
    outcome,
  };
  if (outcome === 'retrying') return { item, record, outcome, nextAt: extra.nextAt ?? 0 };
  if (outcome === 'disabled') return { item, record, outcome, reason: 'gone (410)' };
  return { item, record, outcome: outcome as 'delivered' | 'gave_up' | 'skipped' };
}

const rowsOf = (store: OpenedStore) =>
  store.db.all<{ endpoint_id: number; seq: number; attempt: number }>(
    'SELECT endpoint_id, seq, attempt FROM notify_outbox ORDER BY endpoint_id, seq',
  );

describeEachBackend('the notification outbox', (backend) => {
  test("filling adds an endpoint's wanted events after its cursor and moves the cursor past them in the same write, a page at a time", async (t) => {
    const { store } = await backend.tempStore(t);
    const orders = await endpointOf(store);
    const prices = await endpointOf(store, ['product.*'], 'http://127.0.0.1:9/prices');
    await liveOrder(store, 'F-1'); // seq 1-4, order events only
    assert.deepEqual(
      await store.outbox.fill({ id: orders.id, cursor: 0 }, wantedTypes(orders.events), { page: 3 }),
      {
        added: 3,
        upTo: 3,
        more: true,
      },
    );
    assert.equal((await store.endpoints.get(orders.id))!.cursor, 3);
    assert.deepEqual(await fill(store, orders.id), { added: 1, upTo: 4, more: false });
    assert.deepEqual(await fill(store, orders.id), { added: 0, more: false }, 'nothing new: nothing written');
    assert.deepEqual(
      await fill(store, prices.id),
      { added: 0, upTo: 4, more: false },
      'not wanted: cursor only',
    );
    assert.equal((await store.endpoints.get(prices.id))!.cursor, 4);
    assert.deepEqual(
      (await rowsOf(store)).map((r) => [r.endpoint_id, r.seq, r.attempt]),
      [1, 2, 3, 4].map((seq) => [orders.id, seq, 1]),
    );
    // A filler that read an old cursor adds nothing twice: the cursor is read again in the write.
    assert.deepEqual(await store.outbox.fill({ id: orders.id, cursor: 0 }, wantedTypes(orders.events)), {
      added: 0,
      more: false,
    });
  });

  test('an event already settled at the endpoint is not added again, and a disabled endpoint gets nothing', async (t) => {
    const { store } = await backend.tempStore(t);
    const endpoint = await endpointOf(store);
    await liveOrder(store, 'S-1');
    await store.deliveries.record({
      endpointId: endpoint.id,
      seq: 2,
      type: 'order.updated',
      partnerRef: 'S-1',
      attempt: 1,
      requestedAt: 1,
      status: 200,
      durationMs: 1,
      error: null,
      outcome: 'delivered',
    });
    await fill(store, endpoint.id);
    assert.deepEqual(
      (await rowsOf(store)).map((r) => r.seq),
      [1, 3, 4],
    );
    await store.endpoints.disable(endpoint.id, 'by hand');
    await liveOrder(store, 'S-2');
    assert.deepEqual(await store.outbox.fill({ id: endpoint.id, cursor: 4 }, ['order.updated']), {
      added: 0,
      more: false,
    });
    assert.deepEqual(await rowsOf(store), [], "disabling dropped the endpoint's rows");
    assert.deepEqual(
      (await store.deliveries.history({ endpointId: endpoint.id }))
        .map((d) => [d.seq, d.outcome])
        .sort((a, b) => Number(a[0]) - Number(b[0])),
      [
        [1, 'skipped'],
        [2, 'delivered'],
        [3, 'skipped'],
        [4, 'skipped'],
      ],
    );
  });

  test("picking takes due notifications oldest first, an order's next event only once its earlier one is gone, and leases them", async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const endpoint = await endpointOf(store, ['*']);
    await liveOrder(store, 'P-1'); // seq 1-4
    await liveOrder(store, 'P-2'); // seq 5-8
    await store.catalog.applySync({
      readAt: clock.now(),
      categories: [],
      products: [],
      profile: { balance: 100, readAt: clock.now() },
    });
    await fill(store, endpoint.id);

    const first = await store.outbox.pick(endpoint.id, 10, LEASE_MS);
    assert.deepEqual(
      first.map((p) => [p.seq, p.attempt, p.event?.seq]),
      [
        [1, 1, 1],
        [5, 1, 5],
      ],
      'one event per order at a time',
    );
    assert.deepEqual(
      await store.outbox.pick(endpoint.id, 10, LEASE_MS),
      [],
      'leased, and the rest wait for them',
    );
    await store.outbox.settleBatch([settled(first[0]!, 'delivered')]);
    assert.deepEqual(
      (await store.outbox.pick(endpoint.id, 10, LEASE_MS)).map((p) => p.seq),
      [2],
      "P-1's next event goes once its first is delivered",
    );
    clock.advance(LEASE_MS);
    assert.deepEqual(
      (await store.outbox.pick(endpoint.id, 10, LEASE_MS)).map((p) => p.seq),
      [2, 5],
      "a lease that ran out (its sender died) is taken again; P-1's event 3 still waits for 2",
    );
  });

  test("a notification added again (retry, replay) waits behind its order's notifications still in the outbox, then goes before the later ones", async (t) => {
    const { store } = await backend.tempStore(t);
    const endpoint = await endpointOf(store);
    await liveOrder(store, 'Q-1'); // seq 1-4
    await fill(store, endpoint.id);
    const sent: number[][] = [];
    const next = async (outcome: DeliveryOutcome = 'delivered') => {
      const picked = await store.outbox.pick(endpoint.id, 10, LEASE_MS);
      sent.push(picked.map((p) => p.seq));
      await store.outbox.settleBatch(picked.map((p) => settled(p, outcome)));
    };
    await next('gave_up');
    assert.equal(await store.outbox.enqueue(endpoint.id, [1]), 1, 'given up, sent again');
    for (let i = 0; i < 4; i++) await next();
    assert.deepEqual(sent, [[1], [2], [1], [3], [4]], 'one at a time, and never 3 before the resent 1');
    assert.deepEqual(await rowsOf(store), []);
  });

  test('two processes picking at once never lease one notification twice', async (t) => {
    const { store, url } = await backend.tempStore(t, { now: Date.now });
    const other = await backend.open(t, url, { now: Date.now });
    const endpoint = await endpointOf(store);
    for (let i = 0; i < 20; i++)
      await store.writer.applyOrderSnapshot(snapshot(`T-${i}`, 'PENDING'), { source: 'poll' });
    await fill(store, endpoint.id);
    const picked: number[] = [];
    for (let round = 0; round < 10; round++) {
      const [a, b] = await Promise.all([
        store.outbox.pick(endpoint.id, 3, LEASE_MS),
        other.outbox.pick(endpoint.id, 3, LEASE_MS),
      ]);
      picked.push(...a.map((p) => p.seq), ...b.map((p) => p.seq));
    }
    assert.equal(picked.length, 20);
    assert.equal(new Set(picked).size, 20, 'each once');
  });

  test('a failed attempt is tried again when due, as the next attempt; the last gives up; each is in the history', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const endpoint = await endpointOf(store);
    await store.writer.applyOrderSnapshot(snapshot('R-1', 'PENDING'), { source: 'poll' });
    await fill(store, endpoint.id);
    const [item] = await store.outbox.pick(endpoint.id, 10, LEASE_MS);
    await store.outbox.settleBatch([settled(item!, 'retrying', { nextAt: clock.now() + 5_000 })]);
    assert.deepEqual(await store.outbox.pick(endpoint.id, 10, LEASE_MS), [], 'not before it is due');
    clock.advance(5_000);
    const [again] = await store.outbox.pick(endpoint.id, 10, LEASE_MS);
    assert.deepEqual([again?.seq, again?.attempt], [1, 2]);
    await store.outbox.settleBatch([settled(again!, 'gave_up')]);
    assert.deepEqual(await rowsOf(store), []);
    assert.deepEqual(
      (await store.deliveries.history()).map((d) => [d.attempt, d.outcome]),
      [
        [2, 'gave_up'],
        [1, 'retrying'],
      ],
    );
  });

  test('a sender whose lease ran out and was taken changes nothing but the history; the new holder settles it', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const endpoint = await endpointOf(store);
    await store.writer.applyOrderSnapshot(snapshot('L-1', 'PENDING'), { source: 'poll' });
    await fill(store, endpoint.id);
    const [stale] = await store.outbox.pick(endpoint.id, 10, LEASE_MS);
    clock.advance(LEASE_MS);
    const [fresh] = await store.outbox.pick(endpoint.id, 10, LEASE_MS);
    await store.outbox.settleBatch([settled(stale!, 'retrying', { nextAt: clock.now() + 60_000 })]);
    assert.deepEqual(
      (await rowsOf(store)).map((r) => r.attempt),
      [1],
      'the late failure did not move it',
    );
    await store.outbox.settleBatch([settled(fresh!, 'delivered')]);
    assert.deepEqual(await rowsOf(store), []);
    assert.deepEqual(
      (await store.deliveries.history()).map((d) => d.outcome),
      ['delivered', 'retrying'],
    );
  });

  test('410 disables the endpoint and drops its other notifications, each recorded skipped; retry and replay add them back from attempt 1', async (t) => {
    const { store } = await backend.tempStore(t);
    const endpoint = await endpointOf(store);
    const other = await endpointOf(store, ['order.*'], 'http://127.0.0.1:9/other');
    await liveOrder(store, 'D-1'); // seq 1-4
    await fill(store, endpoint.id);
    await fill(store, other.id);
    const [item] = await store.outbox.pick(endpoint.id, 1, LEASE_MS);
    await store.outbox.settleBatch([settled(item!, 'disabled')]);
    assert.match((await store.endpoints.get(endpoint.id))!.disabledReason ?? '', /410/);
    assert.deepEqual(
      (await rowsOf(store)).map((r) => r.endpoint_id),
      [other.id, other.id, other.id, other.id],
      "the other endpoint's rows stay",
    );
    assert.deepEqual(
      (await store.deliveries.history({ endpointId: endpoint.id })).map((d) => [d.seq, d.outcome]).sort(),
      [
        [1, 'disabled'],
        [2, 'skipped'],
        [3, 'skipped'],
        [4, 'skipped'],
      ],
    );
    assert.equal(await store.outbox.enqueue(other.id, [1, 2]), 0, 'still in the outbox: left as it is');
    assert.equal(await store.outbox.enqueue(endpoint.id, [2, 3]), 0, 'a disabled endpoint is sent nothing');
    await store.endpoints.enable(endpoint.id);
    await liveOrder(store, 'D-2'); // seq 5-8, after the cursor of the enabled endpoint
    assert.equal(
      await store.outbox.enqueue(endpoint.id, [2, 3, 5]),
      2,
      'a re-add takes only events the cursor has passed: 5 comes with the next look, in its order',
    );
    assert.deepEqual(
      (await rowsOf(store)).filter((r) => r.endpoint_id === endpoint.id).map((r) => [r.seq, r.attempt]),
      [
        [2, 1],
        [3, 1],
      ],
    );
  });
});
