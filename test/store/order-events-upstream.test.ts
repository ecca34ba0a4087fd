import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ApplyOptions } from '../../src/store/order-writer.js';
import { rewindToSchema22, snapshot } from '../helpers/store.js';
import { describeEachBackend, type StoreBackend } from '../helpers/store-backends.js';

/** A webhook of `upstream` with `eventId`, as the worker applies it. */
const webhook = (upstream: string, eventId: string): ApplyOptions => ({
  source: 'webhook',
  eventId,
  upstream,
});

/** Every recorded event as (order, upstream, event id, reason), in the order recorded. */
async function recorded(store: Awaited<ReturnType<StoreBackend['tempStore']>>['store'], refs: string[]) {
  const rows: [string, string, string | null, string][] = [];
  for (const ref of refs) {
    for (const e of await store.queries.listEvents(ref)) rows.push([ref, e.upstream, e.eventId, e.reason]);
  }
  return rows;
}

describeEachBackend('order events per upstream', (backend) => {
  test("two upstreams' event ids are apart: beta's 123, the default's 123 and the default's beta/123 are three events, each applied once", async (t) => {
    const { store } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('D1', 'PENDING'), { source: 'create' });
    await store.writer.applyOrderSnapshot(snapshot('B1', 'PENDING'), webhook('beta', '122'));

    const first = [
      await store.writer.applyOrderSnapshot(snapshot('B1', 'PROCESSING'), webhook('beta', '123')),
      await store.writer.applyOrderSnapshot(snapshot('D1', 'PROCESSING'), webhook('default', '123')),
      await store.writer.applyOrderSnapshot(snapshot('D1', 'SUCCESS'), webhook('default', 'beta/123')),
    ];
    const again = [
      await store.writer.applyOrderSnapshot(snapshot('B1', 'PROCESSING'), webhook('beta', '123')),
      await store.writer.applyOrderSnapshot(snapshot('D1', 'PROCESSING'), webhook('default', '123')),
      await store.writer.applyOrderSnapshot(snapshot('D1', 'SUCCESS'), webhook('default', 'beta/123')),
    ];

    assert.deepEqual(
      first.map((r) => [r.duplicate, r.changed]),
      [
        [false, true],
        [false, true],
        [false, true],
      ],
    );
    assert.deepEqual(
      again.map((r) => r.duplicate),
      [true, true, true],
    );
    assert.deepEqual(await recorded(store, ['D1', 'B1']), [
      ['D1', 'default', null, 'initial'],
      ['D1', 'default', '123', 'transition'],
      ['D1', 'default', 'beta/123', 'transition'],
      ['B1', 'beta', '122', 'initial'],
      ['B1', 'beta', '123', 'transition'],
    ]);
  });

  test('an upgrade from schema 22 gives every event its upstream and its plain id, so a redelivery of any of them is still a duplicate', async (t) => {
    const { store, url } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('D1', 'PENDING'), { source: 'create' });
    await store.writer.applyOrderSnapshot(snapshot('D1', 'PROCESSING'), webhook('default', '7'));
    // A default event id that happens to read like a prefixed one.
    await store.writer.applyOrderSnapshot(snapshot('D1', 'SUCCESS'), webhook('default', 'beta/9'));
    // beta's order, and beta's webhook about the default's order (recorded, never applied).
    await store.writer.applyOrderSnapshot(snapshot('B1', 'PROCESSING'), webhook('beta', '7'));
    await store.writer.applyOrderSnapshot(snapshot('D1', 'FAILED'), webhook('beta', '8'));
    // The default's webhook about beta's order.
    await store.writer.applyOrderSnapshot(snapshot('B1', 'FAILED'), webhook('default', '10'));
    const expected = await recorded(store, ['D1', 'B1']);
    // As schema 22 kept them: beta's event ids prefixed `beta/`, no upstream column.
    await store.db.write((tx) => rewindToSchema22(tx));
    assert.deepEqual(
      (
        await store.db.all<{ event_id: string }>(
          'SELECT event_id FROM order_events WHERE event_id IS NOT NULL ORDER BY id',
        )
      ).map((row) => row.event_id),
      ['7', 'beta/9', 'beta/7', 'beta/8', '10'],
    );
    await store.close();

    const upgraded = await backend.open(t, url);
    assert.deepEqual(await recorded(upgraded, ['D1', 'B1']), expected);
    assert.deepEqual(expected, [
      ['D1', 'default', null, 'initial'],
      ['D1', 'default', '7', 'transition'],
      ['D1', 'default', 'beta/9', 'transition'],
      ['D1', 'beta', '8', 'wrong_upstream'],
      ['B1', 'beta', '7', 'initial'],
      ['B1', 'default', '10', 'wrong_upstream'],
    ]);
    const redelivered = [
      await upgraded.writer.applyOrderSnapshot(snapshot('D1', 'PROCESSING'), webhook('default', '7')),
      await upgraded.writer.applyOrderSnapshot(snapshot('D1', 'SUCCESS'), webhook('default', 'beta/9')),
      await upgraded.writer.applyOrderSnapshot(snapshot('B1', 'PROCESSING'), webhook('beta', '7')),
      await upgraded.writer.applyOrderSnapshot(snapshot('D1', 'FAILED'), webhook('beta', '8')),
      await upgraded.writer.applyOrderSnapshot(snapshot('B1', 'FAILED'), webhook('default', '10')),
    ];
    assert.deepEqual(
      redelivered.map((r) => r.duplicate),
      [true, true, true, true, true],
    );
    // And beta's next event with an id the default once used is beta's own.
    const fresh = await upgraded.writer.applyOrderSnapshot(snapshot('B1', 'SUCCESS'), webhook('beta', '10'));
    assert.equal(fresh.duplicate, false);
  });
});
