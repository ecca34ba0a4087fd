import assert from 'node:assert/strict';
import { test } from 'node:test';
import { placeOrder } from '../../src/orders/place-order.js';
import {
  differencesFromSimulator,
  metricValue,
  reconcilerEnv,
  startTestReconciler,
  targetFor,
} from '../helpers/reconciler.js';
import { uniqueRef } from '../helpers/simulator.js';
import { everyOrder } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';

test('with every webhook dropped, orders of every timeline reach the upstream’s final state by polling alone', async (t) => {
  const env = await reconcilerEnv(t, { sim: { timeScale: 0.01 } });
  await env.sim.setFaults({ webhook_drop: 1 });
  await startTestReconciler(env);

  // 0002 … 0006, the default timeline (0001) and two that stay PENDING until the control API moves them.
  const suffixes = ['0001', '0002', '0003', '0004', '0005', '0006', '0007', '0007'];
  const refs: string[] = [];
  for (const suffix of suffixes) {
    const placed = await placeOrder(
      { client: env.client, store: env.store },
      { productCode: 'MLBB-86', data: targetFor(suffix), partnerRef: uniqueRef(`drop-${suffix}`) },
    );
    assert.equal(placed.outcome, 'accepted');
    refs.push(placed.order.partnerRef);
  }
  const [manualSuccess, manualFailure] = refs.slice(-2) as [string, string];

  // The control API moves them only after the reconciler has polled them at least once.
  await waitFor(
    () => everyOrder(env.store, [manualSuccess, manualFailure], (order) => order.pollCount >= 1),
    {
      message: 'a first poll of the PENDING orders',
    },
  );
  assert.equal(
    (await env.sim.setStatus(manualSuccess, { status: 'SUCCESS', serial_number: 'SN-MANUAL' })).status,
    200,
  );
  assert.equal((await env.sim.setStatus(manualFailure, { status: 'FAILED' })).status, 200);

  await waitFor(
    async () =>
      (await differencesFromSimulator(env.store, env.sim, refs)).length === 0 &&
      (await everyOrder(env.store, refs, (order) => order.nextPollAt === null)),
    {
      timeoutMs: 20_000,
      message: `local orders equal to GET /__sim/orders: ${await differencesFromSimulator(env.store, env.sim, refs)}`,
    },
  );

  const delivered = (await env.sim.control('/webhooks')).body as Array<{ delivered: boolean }>;
  assert.equal(delivered.filter((d) => d.delivered).length, 0, 'no webhook got through');
  for (const ref of refs) {
    const sources = new Set((await env.store.queries.listEvents(ref)).map((e) => e.source));
    assert.deepEqual([...sources].sort(), ['create', 'poll'], ref);
  }
  // Every order moved at least once by polling: each such poll stands for a lost webhook.
  assert.ok((await metricValue(env.metrics, 'h2h_reconcile_orders_changed_total')) >= refs.length);
  assert.ok((await metricValue(env.metrics, 'h2h_order_time_to_final_seconds', { source: 'poll' })) >= 0);
});
