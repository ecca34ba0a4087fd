import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import type { DeliveryOutcome } from '../../src/store/notify-deliveries.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { liveOrder } from '../helpers/notify.js';
import { describeEachBackend } from '../helpers/store-backends.js';

/** The backlog of `h2h-sync status` (NotifyDeliveries.backlog): a bounded read of the feed. */

async function attempt(store: OrderStore, endpointId: number, seq: number, outcome: DeliveryOutcome) {
  const event = (await store.feed.get(seq))!;
  await store.deliveries.record({
    endpointId,
    seq,
    type: event.type,
    partnerRef: null,
    attempt: 1,
    requestedAt: seq,
    status: outcome === 'delivered' ? 200 : 503,
    durationMs: 1,
    error: null,
    outcome,
  });
}

describeEachBackend('the notification backlog of status', (backend) => {
  test('the backlog counts the newest feed events only, and says so when older ones were not read', async (t) => {
    const { store } = await backend.tempStore(t);
    const endpoint = await store.endpoints.add({
      url: 'http://127.0.0.1:9/hook',
      events: ['order.*'],
      secret: generateEndpointSecret(),
    });
    for (const ref of ['B-1', 'B-2', 'B-3']) await liveOrder(store, ref); // seq 1-12
    for (const seq of [1, 2, 3, 5, 6, 7, 8]) await attempt(store, endpoint.id, seq, 'delivered');
    await attempt(store, endpoint.id, 9, 'retrying');
    const types = ['order.submitted', 'order.updated'];
    const feed = await store.feed.after(0, 100);
    assert.deepEqual(
      [...new Set(feed.map((e) => e.type))].sort(),
      types,
      'the order events are of these two types',
    );

    // Everything read: seq 4 (never attempted) and 9-12 (9 failing) are pending.
    const whole = await store.deliveries.backlog(endpoint.id, 0, types);
    assert.deepEqual(
      {
        ...whole,
        oldestPendingAt: whole.oldestPendingAt === Date.parse((await store.feed.get(4))!.timestamp),
      },
      { pending: 5, failing: 1, gaveUp: 0, capped: false, oldestPendingAt: true },
    );
    // The newest 6 events (7-12): seq 4 is left out, and the figures are marked as lower bounds.
    const newest = await store.deliveries.backlog(endpoint.id, 0, types, { window: 6 });
    assert.deepEqual(
      {
        ...newest,
        oldestPendingAt: newest.oldestPendingAt === Date.parse((await store.feed.get(9))!.timestamp),
      },
      { pending: 4, failing: 1, gaveUp: 0, capped: true, oldestPendingAt: true },
    );
    // A window reaching back to the endpoint's start reads everything: not capped.
    assert.equal((await store.deliveries.backlog(endpoint.id, 6, types, { window: 6 })).capped, false);
    // Only the wanted types count (the type filter is a bound list).
    assert.equal((await store.deliveries.backlog(endpoint.id, 0, ['order.submitted'])).pending, 1);
    assert.deepEqual(await store.deliveries.backlog(endpoint.id, 0, []), {
      pending: 0,
      oldestPendingAt: null,
      failing: 0,
      gaveUp: 0,
      capped: false,
    });
  });

  test('given-up events are counted over the whole history, up to the bound, and not once delivered again', async (t) => {
    const { store } = await backend.tempStore(t);
    const endpoint = await store.endpoints.add({
      url: 'http://127.0.0.1:9/hook',
      events: ['order.*'],
      secret: generateEndpointSecret(),
    });
    await liveOrder(store, 'G-1'); // seq 1-4
    await liveOrder(store, 'G-2'); // seq 5-8
    await attempt(store, endpoint.id, 1, 'gave_up');
    await attempt(store, endpoint.id, 2, 'gave_up');
    await attempt(store, endpoint.id, 3, 'gave_up');
    // Event 3 was retried by hand and delivered since: no longer given up.
    await store.deliveries.record({
      endpointId: endpoint.id,
      seq: 3,
      type: (await store.feed.get(3))!.type,
      partnerRef: null,
      attempt: 1,
      requestedAt: 100,
      status: 200,
      durationMs: 1,
      error: null,
      outcome: 'delivered',
    });
    const types = ['order.submitted', 'order.updated'];
    // Events 1 and 2 are older than the window of 4 feed events, and still counted.
    const backlog = await store.deliveries.backlog(endpoint.id, 0, types, { window: 4 });
    assert.equal(backlog.gaveUp, 2);
    assert.equal((await store.deliveries.backlog(endpoint.id, 0, types, { window: 1 })).gaveUp, 1);
    assert.equal(
      (await store.deliveries.backlog(endpoint.id, 1, types)).gaveUp,
      1,
      'after the endpoint start',
    );
  });
});
