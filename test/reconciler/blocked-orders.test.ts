import assert from 'node:assert/strict';
import { test } from 'node:test';
import { placeOrder } from '../../src/orders/place-order.js';
import { runReconcilePass } from '../../src/reconciler/reconcile-pass.js';
import { metricValue, reconcilerEnv, targetFor } from '../helpers/reconciler.js';

const PRICE = 19_500; // MLBB-86 at reseller prices

test('orders blocked by a refused key wait, counted, without a call each; a probe that works has them submitted again with their partner_ref, once each', async (t) => {
  const env = await reconcilerEnv(t);
  const before = await env.sim.balance();
  await env.sim.patchMember('M-0001', { h2h_enabled: false });
  const refs = ['blocked-1', 'blocked-2', 'blocked-3'];
  for (const ref of refs) {
    const placed = await placeOrder(
      { client: env.client, store: env.store },
      { productCode: 'MLBB-86', data: targetFor('0001'), partnerRef: ref },
    );
    assert.equal(placed.outcome, 'blocked');
  }
  assert.equal((await env.store.queries.countByStatus()).bySubmissionState.blocked, 3);
  assert.equal(await metricValue(env.metrics, 'h2h_reconcile_blocked_orders'), 3);

  const refused = await runReconcilePass(env.deps);
  assert.deepEqual(
    [refused.stoppedBy, refused.probe, refused.calls, refused.resubmitted],
    ['unauthorized', 'failed', 1, 0],
    'one probe, no create',
  );
  assert.equal(refused.circuit?.code, 'INVALID_API_KEY');
  assert.match(refused.circuit?.fix ?? '', /H2H_API_KEY/);

  await env.sim.patchMember('M-0001', { h2h_enabled: true });
  const resumed = await runReconcilePass(env.deps);

  assert.deepEqual([resumed.probe, resumed.resubmitted, resumed.stoppedBy], ['ok', 3, 'done']);
  const upstream = await env.sim.allOrders();
  assert.deepEqual(upstream.map((o) => o.partner_ref).sort(), refs, 'one order per partner_ref');
  assert.equal(before - (await env.sim.balance()), 3 * PRICE, 'one debit each');
  for (const ref of refs) assert.equal((await env.store.queries.getOrder(ref))!.submissionState, 'accepted');
  assert.equal(await metricValue(env.metrics, 'h2h_reconcile_blocked_orders'), 0);
});
