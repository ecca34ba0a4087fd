import assert from 'node:assert/strict';
import { test } from 'node:test';
import { placeOrder } from '../../src/orders/place-order.js';
import { pollOrderNow } from '../../src/reconciler/early-poll.js';
import { runReconcilePass } from '../../src/reconciler/reconcile-pass.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { metricValue, reconcilerEnv, targetFor } from '../helpers/reconciler.js';

const NOT_FOUND_BODIES = [
  '<html><body><h1>404 Not Found</h1></body></html>',
  '{"statusCode":404,"message":"Not Found"}',
  '',
];

test('any 404 of GET /orders/:ref means "not there", whatever its body: an unresolved submission is created again with the same partner_ref', async (t) => {
  const env = await reconcilerEnv(t);
  const refs = NOT_FOUND_BODIES.map((_, i) => `lost-create-${i}`);
  // The creates never reach the order book: their outcome is unknown.
  await env.sim.setFaults({ error_5xx: 1 });
  for (const ref of refs) {
    const placed = await placeOrder(
      { client: env.client, store: env.store },
      { productCode: 'MLBB-86', data: targetFor('0007'), partnerRef: ref },
    );
    assert.equal(placed.outcome, 'unknown');
  }
  await env.sim.setFaults({ error_5xx: 0 });

  for (const [i, body] of NOT_FOUND_BODIES.entries()) {
    await env.sim.setFaults({ order_not_found_body: body });
    const result = await pollOrderNow(env.deps, refs[i]!);
    assert.equal(result.kind, 'polled', JSON.stringify(result));
    assert.equal(
      result.kind === 'polled' && result.outcome,
      'resubmitted',
      `404 body ${JSON.stringify(body)}`,
    );
  }

  const upstream = await env.sim.allOrders();
  assert.deepEqual(upstream.map((o) => o.partner_ref).sort(), [...refs].sort(), 'one order per partner_ref');
  for (const ref of refs) assert.equal((await env.store.queries.getOrder(ref))!.submissionState, 'accepted');
});

test('an early poll of a ref nobody has is "unknown order" whatever the 404 body says', async (t) => {
  const env = await reconcilerEnv(t);
  await env.sim.setFaults({ order_not_found_body: NOT_FOUND_BODIES[0]! });
  const result = await pollOrderNow(env.deps, 'nobody-anywhere');
  assert.equal(result.kind, 'unknown_order');
});

test('a 404 of POST /orders means the base URL is wrong: the order stays unknown, the pass stops, and the log, metric and status name H2H_BASE_URL; fixed, the same partner_ref is created once', async (t) => {
  const env = await reconcilerEnv(t, { manualClock: true });
  // A base URL the upstream has no member API under: every route answers 404.
  const wrong = new UpstreamClient({
    baseUrl: `${env.sim.sim.origin}/v2/member-api`,
    apiKey: env.sim.member.api_key,
    budget: env.budget,
    retry: { maxAttempts: 1 },
  });
  t.after(() => wrong.close());
  const wrongDeps = { ...env.deps, client: wrong };

  const placed = await placeOrder(
    { client: wrong, store: env.store },
    { productCode: 'MLBB-86', data: targetFor('0001'), partnerRef: 'wrong-url-1' },
  );
  assert.equal(placed.outcome, 'unknown', 'not rejected: the order may still be placed');
  assert.match(placed.outcome === 'unknown' ? placed.fix : '', /H2H_BASE_URL/);
  assert.equal((await env.store.queries.getOrder('wrong-url-1'))!.submissionState, 'unknown');

  const pass = await runReconcilePass(wrongDeps);
  assert.equal(pass.stoppedBy, 'base_url');
  assert.match(pass.error?.fix ?? '', /H2H_BASE_URL/);
  assert.equal(pass.circuit?.cause, 'base_url');
  assert.equal(
    (await env.store.queries.getOrder('wrong-url-1'))!.submissionState,
    'unknown',
    'never rejected',
  );
  assert.equal(await metricValue(env.metrics, 'h2h_reconcile_circuit_open', { cause: 'base_url' }), 1);
  assert.match((await env.store.circuit.state())?.fix ?? '', /H2H_BASE_URL/, 'what `status` shows');
  assert.ok(env.log.records().some((l) => l.level === 50 && /H2H_BASE_URL/.test(String(l.msg))));

  const probed = await runReconcilePass(wrongDeps);
  assert.deepEqual([probed.stoppedBy, probed.probe, probed.calls], ['base_url', 'failed', 1]);

  const fixed = await runReconcilePass(env.deps);
  assert.deepEqual([fixed.probe, fixed.resubmitted, fixed.stoppedBy], ['ok', 1, 'done']);
  const upstream = await env.sim.allOrders();
  assert.deepEqual(
    upstream.map((o) => o.partner_ref),
    ['wrong-url-1'],
  );
  assert.equal((await env.store.queries.getOrder('wrong-url-1'))!.invoiceNumber, upstream[0]!.invoice_number);
});
