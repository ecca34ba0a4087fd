import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ApplyOptions } from '../../src/store/order-writer.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

/** A catalog of ML86 at `price`, with the profile balance `balance`, read at `readAt`. */
const catalogAt = (readAt: number, price: number, balance: number) =>
  catalogSnapshot({ readAt, price, balance });

describeEachBackend('the balance credit', (backend) => {
  test('an order is credited exactly what it was debited: not a later catalog price, not the amount learnt later, nothing when it was accepted unpriced', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const write = (ref: string, status: string, amount: number | null, productCode = 'ML86') =>
      store.writer.applyOrderSnapshot(
        // biome-ignore lint/suspicious/noExplicitAny: the upstream left `amount` out of this answer
        snapshot(ref, status, { amount: amount as any, product_code: productCode }),
        { source: 'poll' },
      );
    await store.catalog.applySync(catalogAt(clock.now(), 15_000, 1_000_000));

    await write('AT-CATALOG', 'PENDING', null); // debited at the catalog price, 15,000
    await write('AT-CATALOG-THEN-AMOUNT', 'PENDING', null); // 15,000 too
    await write('UNPRICED', 'PENDING', null, 'ZZ'); // no price known: nothing debited
    assert.deepEqual(
      [(await store.balance.view()).debited, (await store.balance.view()).unpriced_orders],
      [30_000, 1],
    );

    clock.advance(1_000);
    await store.catalog.applySync(catalogAt(clock.now(), 20_000, 970_000)); // the price is now 20,000
    await write('AT-CATALOG', 'FAILED', null);
    assert.equal((await store.balance.view()).credited, 15_000, 'the 15,000 debited, not the new 20,000');
    await write('AT-CATALOG-THEN-AMOUNT', 'FAILED', 17_000);
    assert.equal((await store.balance.view()).credited, 30_000, 'the 15,000 debited, not the amount 17,000');
    await write('UNPRICED', 'FAILED', 9_000);
    assert.equal((await store.balance.view()).credited, 30_000, 'nothing was debited, nothing is credited');
    assert.equal((await store.balance.view()).balance, 1_000_000);
  });

  test('a refund or a failure that arrives again is credited once: the same delivery twice, another event or a poll of the same status, twice in one group commit', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const apply = (ref: string, status: string, options: ApplyOptions) =>
      store.writer.applyOrderSnapshot(snapshot(ref, status), options);
    await store.catalog.applySync(catalogAt(clock.now(), 15_000, 1_000_000));
    await apply('REFUNDED-ORDER', 'SUCCESS', { source: 'webhook', eventId: 'e-success' });
    await apply('FAILED-ORDER', 'PROCESSING', { source: 'webhook', eventId: 'e-processing' });
    assert.equal((await store.balance.view()).balance, 970_000, 'both debited 15,000');

    await apply('REFUNDED-ORDER', 'REFUNDED', { source: 'webhook', eventId: 'e-refund' });
    await apply('REFUNDED-ORDER', 'REFUNDED', { source: 'webhook', eventId: 'e-refund' });
    await apply('REFUNDED-ORDER', 'REFUNDED', { source: 'webhook', eventId: 'e-refund-again' });
    await apply('REFUNDED-ORDER', 'REFUNDED', { source: 'poll' });
    assert.equal((await store.balance.view()).credited, 15_000, 'the refund, once');

    const failed = snapshot('FAILED-ORDER', 'FAILED');
    const outcomes = await store.writer.applyBatch([
      { snapshot: failed, options: { source: 'webhook', eventId: 'e-failed' } },
      { snapshot: failed, options: { source: 'webhook', eventId: 'e-failed' } },
      { snapshot: failed, options: { source: 'webhook', eventId: 'e-failed-again' } },
      { snapshot: failed, options: { source: 'poll' } },
    ]);
    assert.ok(outcomes.every((outcome) => outcome.ok));
    const balance = await store.balance.view();
    assert.deepEqual([balance.debited, balance.credited], [30_000, 30_000], 'the failure, once');
    assert.equal(balance.balance, 1_000_000, 'back to the profile balance, never above it');
  });
});
