import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  demoFixture,
  fixtureProduct,
  startSimulator,
  type TestSimulator,
  userIdEndingIn,
} from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';

const FINAL = new Set(['SUCCESS', 'FAILED', 'REFUNDED']);

/**
 * Creates `count` ordinary orders of FF-70 (the demo reseller can pay for 104 at once) (no magic suffix) one after the other, refs `<prefix>-<i>`,
 * waits until every order of the simulator is final and returns the refs that ended FAILED.
 */
async function failedRefs(harness: TestSimulator, count: number, prefix = 'fr'): Promise<string[]> {
  for (let i = 0; i < count; i++) {
    const answer = await harness.createOrder({
      product_code: 'FF-70',
      partner_ref: `${prefix}-${i}`,
      data: { user_id: userIdEndingIn('1234') },
    });
    assert.equal(answer.status, 201, answer.text);
  }
  const orders = await waitFor(
    async () => {
      const all = await harness.allOrders();
      return all.every((o) => FINAL.has(o.status) && (o.status !== 'SUCCESS' || o.serial_number))
        ? all
        : undefined;
    },
    { message: 'every order final' },
  );
  return orders.filter((o) => o.status === 'FAILED').map((o) => o.partner_ref);
}

describe('the fixture fail_ratio', () => {
  test('0.3 with seed 1 fails exactly 29 of 100 ordinary orders, the same ones after a reset, and credits them back', async (t) => {
    const harness = await startSimulator(t, { fixture: { ...demoFixture(), fail_ratio: 0.3 }, seed: 1 });
    const price = fixtureProduct(harness.fixture, 'FF-70').role_prices.reseller!;

    const failed = await failedRefs(harness, 100);
    assert.equal(failed.length, 29);
    assert.equal(await harness.balance(), harness.member.balance - (100 - failed.length) * price);

    assert.equal((await harness.control('/reset', { method: 'POST' })).status, 200);
    assert.deepEqual(await failedRefs(harness, 100), failed, 'a reset re-seeds the draws');
  });

  test('with seed 2 it fails exactly 23 of 100: the share drawn follows the seed', async (t) => {
    const harness = await startSimulator(t, { fixture: { ...demoFixture(), fail_ratio: 0.3 }, seed: 2 });
    const failed = await failedRefs(harness, 100);
    assert.equal(failed.length, 23);
  });

  test('0 fails none and 1 fails every ordinary order, while magic suffixes keep their timelines', async (t) => {
    const none = await startSimulator(t, { fixture: { ...demoFixture(), fail_ratio: 0 } });
    assert.deepEqual(await failedRefs(none, 20), []);

    const all = await startSimulator(t, { fixture: { ...demoFixture(), fail_ratio: 1 } });
    const magic = await all.createOrder({
      partner_ref: 'magic-0003',
      data: { user_id: userIdEndingIn('0003'), server_id: '2001' },
    });
    assert.equal(magic.status, 201);
    const failed = await failedRefs(all, 20);
    assert.equal(failed.length, 20);
    assert.ok(!failed.includes('magic-0003'));
    assert.equal((await all.getOrder('magic-0003')).body.status, 'SUCCESS');
  });

  test('a fail_ratio out of 0..1 is refused naming the field', async (t) => {
    await assert.rejects(
      startSimulator(t, { fixture: { ...demoFixture(), fail_ratio: 1.5 } }),
      /fail_ratio: must be between 0 and 1/,
    );
  });
});
