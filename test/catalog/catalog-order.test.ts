import assert from 'node:assert/strict';
import { test } from 'node:test';
import { catalogSnapshot } from '../helpers/catalog.js';
import { describeEachBackend } from '../helpers/store-backends.js';

/** A catalog of one product at `price`, read from the upstream at `at`, its profile at `at + 2`. */
const readAt = (at: number, price: number, balance: number) =>
  catalogSnapshot({ readAt: at, profileReadAt: at + 2, price, balance });

describeEachBackend('catalog syncs out of order', (backend) => {
  test('two syncs committed out of order: the one read earlier changes nothing and emits no event; the profile read time is the read, not the commit', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const t0 = clock.now();
    await store.catalog.applySync(readAt(t0, 15_000, 100_000));
    clock.advance(60_000);
    // The worker's sync read at t0 + 10 s, committed at t0 + 60 s: a price change to 20,000.
    const newer = await store.catalog.applySync(readAt(t0 + 10_000, 20_000, 200_000));
    assert.equal(newer.skipped, false);
    assert.equal(newer.priceChanges.length, 1);
    assert.equal((await store.balance.view()).profile_read_at, new Date(t0 + 10_002).toISOString());
    assert.equal(
      await store.catalog.syncedAt(),
      t0 + 10_000,
      'the catalog is as the upstream was at its read',
    );
    const eventsBefore = await store.feed.after(0, 1000);

    // `catalog sync` read before it (t0 + 5 s, the old price) but commits after.
    clock.advance(1_000);
    const older = await store.catalog.applySync(readAt(t0 + 5_000, 15_000, 100_000));
    assert.equal(older.skipped, true);
    assert.deepEqual(older.priceChanges, []);
    assert.deepEqual(await store.feed.after(0, 1000), eventsBefore, 'no product.price_changed back');
    assert.equal((await store.catalog.find({ code: 'ML86' }))!.price, 20_000);
    const balance = await store.balance.view();
    assert.equal(balance.profile_balance, 200_000);
    assert.equal(balance.profile_read_at, new Date(t0 + 10_002).toISOString());
    assert.equal(await store.catalog.syncedAt(), t0 + 10_000);
  });
});
