import assert from 'node:assert/strict';
import { test } from 'node:test';
import { placeOrder } from '../../src/orders/place-order.js';
import { runReconcilePass } from '../../src/reconciler/reconcile-pass.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { startHoldingUpstream } from '../helpers/holding-upstream.js';
import { reconcilerEnv, simulatorRequestLog, targetFor } from '../helpers/reconciler.js';

test('a reconcile pass leaves alone a due order whose create is in flight in another process: no poll, no second create', async (t) => {
  const requests = simulatorRequestLog();
  const env = await reconcilerEnv(t, { manualClock: true, sim: { logger: requests.logger } });
  const ref = 'in-flight-1';
  const upstream = await startHoldingUpstream(
    t,
    env.sim.sim.baseUrl,
    (seen) => seen.method === 'POST' && seen.url.endsWith('/orders'),
  );
  // The placing process: its create is held at the upstream's door far longer than the pass takes.
  const placing = new UpstreamClient({
    baseUrl: upstream.baseUrl,
    apiKey: env.sim.member.api_key,
    budget: env.budget,
    headersTimeoutMs: 120_000,
  });
  t.after(() => placing.close());
  const placed = placeOrder(
    { client: placing, store: env.store },
    { productCode: 'MLBB-86', data: targetFor('0007'), partnerRef: ref },
  );
  await upstream.held;
  env.clock.advance(env.settings.firstPollDelayMs + 1_000);
  assert.deepEqual(
    (await env.store.claims.dueForPoll(10)).map((o) => o.partnerRef),
    [ref],
    'the order is due for its first poll',
  );

  const pass = await runReconcilePass(env.deps);

  assert.equal(
    pass.checked + pass.resubmitted + pass.errors,
    0,
    `the pass took nothing: ${JSON.stringify(pass)}`,
  );
  assert.equal(requests.getsByRef().get(ref), undefined, 'the order was not read');
  upstream.release();
  const result = await placed;
  assert.equal(result.outcome, 'accepted');
  assert.deepEqual(
    upstream.requests.filter((r) => r.method === 'POST').map((r) => JSON.parse(r.body).partner_ref),
    [ref],
    'one create went out',
  );
  assert.deepEqual(await env.sim.createRequests([ref]), { [ref]: 1 }, 'and the upstream saw one');
});
