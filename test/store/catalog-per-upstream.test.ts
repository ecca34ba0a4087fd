import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CatalogSnapshot } from '../../src/store/catalog.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import { rewindToSchema23, snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

/** One upstream's catalog of ML86 (and, on beta, MLBB86 under its own code) at `price`, with its profile `balance`. */
function upstreamCatalog(upstream: string, readAt: number, price: number, balance: number): CatalogSnapshot {
  const base = catalogSnapshot({ readAt, price, balance });
  return {
    ...base,
    upstream,
    products: [
      { ...base.products[0]!, id: `${upstream}-ml86`, code: upstream === 'beta' ? 'MLB-86' : 'ML86' },
      {
        id: `${upstream}-ff70`,
        code: 'FF70',
        name: 'FF 70',
        category_code: 'ML',
        price: price / 2,
        is_active: upstream !== 'beta',
      },
    ],
  };
}

describeEachBackend('the catalog and the balance per upstream', (backend) => {
  test("each upstream's sync replaces its own catalog and balance only; a shop product's candidates are every upstream's, linked by the product map where codes differ", async (t) => {
    const { store, clock } = await backend.tempStore(t, {
      productLinks: [{ code: 'ML86', upstreams: { beta: 'MLB-86' } }],
    });
    await store.catalog.applySync(upstreamCatalog('default', clock.now(), 15_000, 100_000));
    assert.deepEqual(
      (await store.catalog.candidates({ code: 'ML86' })).map((c) => [c.upstream, c.productCode, c.price]),
      [['default', 'ML86', 15_000]],
      'before beta is synced, the default upstream alone',
    );
    clock.advance(1_000);
    const betaRead = clock.now();
    await store.catalog.applySync(upstreamCatalog('beta', betaRead, 14_000, 30_000));
    clock.advance(1_000);
    // The default upstream again: beta's catalog and balance stay.
    await store.catalog.applySync(upstreamCatalog('default', clock.now(), 15_500, 90_000));

    const ml86 = await store.catalog.candidates({ code: 'ML86' });
    assert.deepEqual(
      ml86.map((c) => [c.upstream, c.productId, c.productCode, c.price, c.isActive, c.syncedAt]),
      [
        ['beta', 'beta-ml86', 'MLB-86', 14_000, true, betaRead],
        ['default', 'default-ml86', 'ML86', 15_500, true, clock.now()],
      ],
      'cheapest first, beta under its own code',
    );
    assert.deepEqual(
      await store.catalog.candidates({ code: 'MLB-86' }),
      [],
      "beta's code is no shop product",
    );
    assert.deepEqual(
      (await store.catalog.candidates({ code: 'FF70' })).map((c) => [c.upstream, c.isActive]),
      [
        ['beta', false],
        ['default', true],
      ],
    );
    assert.deepEqual(
      (await store.catalog.products()).map((p) => [p.code, p.price, p.is_active, p.candidates]),
      [
        [
          'FF70',
          7_750,
          true,
          [
            { upstream: 'beta', product_code: 'FF70', price: 7_000, available: false },
            { upstream: 'default', product_code: 'FF70', price: 7_750, available: true },
          ],
        ],
        [
          'ML86',
          14_000,
          true,
          [
            { upstream: 'beta', product_code: 'MLB-86', price: 14_000, available: true },
            { upstream: 'default', product_code: 'ML86', price: 15_500, available: true },
          ],
        ],
      ],
      "each shop product once; its price the cheapest available candidate's",
    );
    assert.equal((await store.catalog.shopProduct({ id: 'BETA-ML86' }))?.code, 'ML86', 'by id, any case');
    assert.deepEqual(
      [await store.catalog.syncedAt('beta'), await store.catalog.syncedAt()],
      [betaRead, betaRead],
      'without an upstream, the oldest sync',
    );

    const balance = await store.balance.view();
    assert.deepEqual(
      [balance.balance, balance.profile_balance, balance.upstreams.map((u) => [u.upstream, u.balance])],
      [
        120_000,
        120_000,
        [
          ['default', 90_000],
          ['beta', 30_000],
        ],
      ],
    );
  });

  test("an order's debit and credit go to its upstream's balance, and balance.low names the upstream that fell under", async (t) => {
    const { store, clock } = await backend.tempStore(t, { balanceLowThreshold: 20_000 });
    await store.catalog.applySync(upstreamCatalog('default', clock.now(), 15_000, 100_000));
    await store.catalog.applySync(upstreamCatalog('beta', clock.now(), 14_000, 30_000));

    await store.writer.applyOrderSnapshot(snapshot('B1', 'PENDING', { amount: 14_000 }), {
      source: 'webhook',
      eventId: 'b1',
      upstream: 'beta',
    });
    await store.writer.applyOrderSnapshot(snapshot('D1', 'PENDING', { amount: 15_000 }), { source: 'poll' });

    const lows = (await store.feed.after(0, 1000)).filter((e) => e.type === 'balance.low').map((e) => e.data);
    assert.deepEqual(
      [(await store.balance.viewOf('beta')).balance, (await store.balance.viewOf('default')).balance],
      [16_000, 85_000],
    );
    assert.deepEqual(lows, [await store.balance.viewOf('beta')]);
    assert.equal((lows[0] as { upstream: string }).upstream, 'beta');
    assert.equal((await store.balance.view()).balance, 101_000);

    await store.writer.applyOrderSnapshot(snapshot('B1', 'FAILED', { amount: 14_000 }), {
      source: 'webhook',
      eventId: 'b2',
      upstream: 'beta',
    });
    assert.deepEqual(
      [(await store.balance.viewOf('beta')).credited, (await store.balance.viewOf('default')).credited],
      [14_000, 0],
    );
  });

  test("an upgrade from schema 23 keeps the catalog, its sync time and the balance as the default upstream's", async (t) => {
    const { store, url, clock } = await backend.tempStore(t);
    await store.catalog.applySync(upstreamCatalog('default', clock.now(), 15_000, 100_000));
    await store.writer.applyOrderSnapshot(snapshot('D1', 'PENDING', { amount: 15_000 }), { source: 'poll' });
    const before = {
      products: await store.catalog.products(),
      categories: await store.catalog.categories(),
      syncedAt: await store.catalog.syncedAt('default'),
      balance: await store.balance.view(),
    };
    await store.db.write((tx) => rewindToSchema23(tx));
    assert.deepEqual(await store.db.all('SELECT id, code FROM catalog_products ORDER BY id'), [
      { id: 'default-ff70', code: 'FF70' },
      { id: 'default-ml86', code: 'ML86' },
    ]);
    await store.close();

    const upgraded = await backend.open(t, url, { now: clock.now });
    assert.deepEqual(
      {
        products: await upgraded.catalog.products(),
        categories: await upgraded.catalog.categories(),
        syncedAt: await upgraded.catalog.syncedAt('default'),
        balance: await upgraded.balance.view(),
      },
      before,
    );
    assert.equal(before.balance.balance, 85_000);
    // And another upstream's next sync is its own, beside them.
    await upgraded.catalog.applySync(upstreamCatalog('beta', clock.now(), 14_000, 30_000));
    assert.deepEqual(
      (await upgraded.catalog.candidates({ code: 'FF70' })).map((c) => c.upstream),
      ['beta', 'default'],
    );
  });
});
