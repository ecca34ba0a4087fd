import assert from 'node:assert/strict';
import { test } from 'node:test';
import { wantedTypes } from '../../src/notify/event-filter.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import type { DeliveryOutcome } from '../../src/store/notify-deliveries.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { liveOrder } from '../helpers/notify.js';
import { describeEachBackend } from '../helpers/store-backends.js';

/** The backlog of `h2h-sync status`: the outbox's rows, the events not added to it yet, the given up. */

async function endpointOf(store: OrderStore) {
  return store.endpoints.add({
    url: 'http://127.0.0.1:9/hook',
    events: ['order.*'],
    secret: generateEndpointSecret(),
  });
}

async function record(
  store: OrderStore,
  endpointId: number,
  seq: number,
  outcome: DeliveryOutcome,
  at = seq,
) {
  const event = (await store.feed.get(seq))!;
  await store.deliveries.record({
    endpointId,
    seq,
    type: event.type,
    partnerRef: null,
    attempt: 1,
    requestedAt: at,
    status: outcome === 'delivered' ? 200 : 503,
    durationMs: 1,
    error: null,
    outcome,
  });
}

describeEachBackend('the notification backlog of status', (backend) => {
  test("the backlog is the endpoint's notifications in the outbox and its wanted events not added yet; failing ones are those tried before", async (t) => {
    const { store } = await backend.tempStore(t);
    const endpoint = await endpointOf(store);
    const types = wantedTypes(endpoint.events);
    for (const ref of ['B-1', 'B-2', 'B-3']) await liveOrder(store, ref); // seq 1-12
    assert.equal((await store.outbox.fill(endpoint, types)).added, 12);
    // Orders B-1, B-2, B-3: their first events are picked (one per order at a time).
    const picked = await store.outbox.pick(endpoint.id, 10, 60_000);
    assert.deepEqual(
      picked.map((p) => p.seq),
      [1, 5, 9],
    );
    const settle = (i: number, outcome: 'delivered' | 'retrying') => ({
      item: picked[i]!,
      record: {
        endpointId: endpoint.id,
        seq: picked[i]!.seq,
        type: picked[i]!.event!.type,
        partnerRef: null,
        attempt: 1,
        requestedAt: 1,
        status: outcome === 'delivered' ? 200 : 503,
        durationMs: 1,
        error: null,
        outcome,
      },
      ...(outcome === 'retrying' ? { outcome, nextAt: 10_000_000_000_000 } : { outcome }),
    });
    await store.outbox.settleBatch([settle(0, 'delivered'), settle(1, 'delivered'), settle(2, 'retrying')]);

    const backlog = await store.outbox.backlog((await store.endpoints.get(endpoint.id))!, types);
    assert.deepEqual(
      {
        ...backlog,
        oldestPendingAt: backlog.oldestPendingAt === Date.parse((await store.feed.get(2))!.timestamp),
      },
      { pending: 10, failing: 1, oldestPendingAt: true },
    );
    // Events committed while no worker adds them count too, by the wanted types only.
    await liveOrder(store, 'B-4'); // seq 13-16
    const stored = (await store.endpoints.get(endpoint.id))!;
    assert.equal((await store.outbox.backlog(stored, types)).pending, 14);
    assert.equal((await store.outbox.backlog(stored, ['order.submitted'])).pending, 11);
    assert.equal((await store.outbox.backlog(stored, [])).pending, 10);
  });

  test('given-up events are counted over the whole history, up to the bound, and not once delivered again', async (t) => {
    const { store } = await backend.tempStore(t);
    const endpoint = await endpointOf(store);
    await liveOrder(store, 'G-1'); // seq 1-4
    await liveOrder(store, 'G-2'); // seq 5-8
    await record(store, endpoint.id, 1, 'gave_up');
    await record(store, endpoint.id, 2, 'gave_up');
    await record(store, endpoint.id, 3, 'gave_up');
    await record(store, endpoint.id, 3, 'delivered', 100); // retried by hand and delivered since
    assert.deepEqual(await store.deliveries.gaveUp(endpoint.id, 0), { count: 2, capped: false });
    assert.deepEqual(await store.deliveries.gaveUp(endpoint.id, 0, { window: 1 }), {
      count: 1,
      capped: true,
    });
    assert.deepEqual(
      await store.deliveries.gaveUp(endpoint.id, 1),
      { count: 1, capped: false },
      'after its start',
    );
  });
});
