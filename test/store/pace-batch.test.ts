import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { OpenedStore } from '../../src/store/open-store.js';
import { PACE_MEMORY } from '../../src/store/order-pace.js';
import type { ApplyItem } from '../../src/store/order-writer.js';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

/**
 * A group commit writes its pace samples once per transaction (order-pace.ts, `PaceBatch`):
 * what it leaves must be what the same applies one by one leave.
 */

const CREATED = Date.UTC(2026, 10, 1);
const BATCH = 100;

/** A seeded stream of whole numbers below `n` (a linear congruential generator). */
function seeded(seed: number): (n: number) => number {
  let state = seed;
  return (n) => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state % n;
  };
}

/**
 * The events: new orders' webhooks of two products in three states with spread durations, and
 * among them duplicates, snapshots that can never apply, and webhooks whose order UPDATE breaks
 * the invoice number's uniqueness after the apply has read the pace (its order is a pending
 * local order reaching PROCESSING, so its first poll asks for the pace).
 */
function events(count: number): { items: ApplyItem[]; local: string[] } {
  const draw = seeded(42);
  const items: ApplyItem[] = [];
  const local: string[] = [];
  for (let i = 0; i < count; i++) {
    const product = draw(3) === 0 ? 'ML87' : 'ML86';
    if (i % 50 === 7) {
      local.push(`L${i}`);
      items.push({
        snapshot: snapshot(`L${i}`, 'PROCESSING', { invoice_number: 'INV-TAKEN', product_code: product }),
        options: {
          source: 'webhook',
          eventId: `e${i}`,
          occurredAt: CREATED + 5_000,
          receivedAt: CREATED + 5_100,
        },
      });
      continue;
    }
    if (i % 37 === 3) {
      items.push({
        snapshot: { ...snapshot('', 'SUCCESS'), partner_ref: '', invoice_number: `INV-NONE-${i}` },
        options: { source: 'webhook', eventId: `e${i}` },
      });
      continue;
    }
    if (i % 13 === 5) {
      items.push({ ...items[i - 1]! });
      continue;
    }
    const status = (['PROCESSING', 'SUCCESS', 'FAILED'] as const)[draw(3)]!;
    const tookMs = 2_000 + draw(200_000);
    const reached = CREATED + tookMs;
    items.push({
      snapshot: snapshot(`R${i}`, status, {
        product_code: product,
        created_at: new Date(CREATED).toISOString(),
        success_at: status === 'SUCCESS' ? new Date(reached).toISOString() : null,
      }),
      options: {
        source: 'webhook',
        eventId: `e${i}`,
        occurredAt: reached,
        receivedAt: reached + draw(3_000),
      },
    });
  }
  return { items, local };
}

async function setUp(store: OpenedStore, local: readonly string[]): Promise<void> {
  await store.writer.applyOrderSnapshot(snapshot('TAKEN', 'PENDING', { invoice_number: 'INV-TAKEN' }), {
    source: 'poll',
  });
  for (const ref of local)
    await store.writer.createLocalOrder({ partnerRef: ref, productCode: 'ML86', data: {} });
}

async function state(store: OpenedStore) {
  return {
    pace: await store.db.all(
      'SELECT product_code, state, bucket, weight FROM order_pace ORDER BY product_code, state, bucket',
    ),
    totals: await store.db.all(
      'SELECT product_code, state, total FROM order_pace_totals ORDER BY product_code, state',
    ),
    orders: await store.db.all(
      'SELECT partner_ref, status, version, next_poll_at, debited_amount FROM orders ORDER BY partner_ref',
    ),
  };
}

describeEachBackend('the pace samples of a group commit', (backend) => {
  test('a batch leaves the pace, its totals and the first polls as the applies one by one, across halvings, failed units and estimate reads', async (t) => {
    const settings = { firstPollQuantile: 0.9, paceMinSamples: 40 };
    const one = await backend.tempStore(t, settings);
    const batched = await backend.tempStore(t, settings);
    const { items, local } = events(1_300);
    await setUp(one.store, local);
    await setUp(batched.store, local);

    const oneOk: boolean[] = [];
    const batchedOk: boolean[] = [];
    for (let start = 0; start < items.length; start += BATCH) {
      const chunk = items.slice(start, start + BATCH);
      for (const { snapshot: s, options } of chunk) {
        oneOk.push(
          await one.store.writer.applyOrderSnapshot(s, options).then(
            () => true,
            () => false,
          ),
        );
      }
      batchedOk.push(...(await batched.store.writer.applyBatch(chunk)).map((outcome) => outcome.ok));
      // Past the estimates' 5 s cache: the next batch's first PROCESSING apply of a product reads
      // them again, after the samples gathered before it in its batch.
      one.clock.advance(6_000);
      batched.clock.advance(6_000);
    }

    assert.deepEqual(batchedOk, oneOk);
    assert.ok(oneOk.filter((ok) => !ok).length >= 50, 'units failed, some after reading the pace');
    const expected = await state(one.store);
    assert.deepEqual(await state(batched.store), expected);
    const delivery = expected.totals.find((row) => (row as { state: string }).state === 'DELIVERY') as {
      total: number;
    };
    assert.ok(delivery.total < PACE_MEMORY && delivery.total % 1 !== 0, `halved: ${delivery.total}`);
    for (const { product_code, state: s, total } of expected.totals as Array<{
      product_code: string;
      state: string;
      total: number;
    }>) {
      const sum = (expected.pace as Array<{ product_code: string; state: string; weight: number }>)
        .filter((row) => row.product_code === product_code && row.state === s)
        .reduce((acc, row) => acc + row.weight, 0);
      assert.equal(total, sum, `${product_code} ${s}`);
    }
  });
});
