import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pollOrderNow } from '../../src/reconciler/early-poll.js';
import { runReconcilePass } from '../../src/reconciler/reconcile-pass.js';
import { reconcilerEnv, targetFor } from '../helpers/reconciler.js';
import { snapshot } from '../helpers/store.js';

test("an early poll or a pass never asks the default upstream about another upstream's order, even when the default upstream has an order under the same ref", async (t) => {
  const env = await reconcilerEnv(t, { manualClock: true });
  // The default upstream (the simulator) has an order of its own under the ref…
  await env.client.createOrder({
    partner_ref: 'shared-ref',
    product_code: 'MLBB-86',
    data: targetFor('0001'),
  });
  // …and beta told us, in a webhook, of its order under the same ref.
  await env.store.writer.applyOrderSnapshot(snapshot('shared-ref', 'PROCESSING'), {
    source: 'webhook',
    eventId: 'e1',
    upstream: 'beta',
  });

  const early = await pollOrderNow(env.deps, 'shared-ref');
  env.clock.advance(3_600_000); // long due for a poll, were it the default upstream's
  await runReconcilePass(env.deps);

  assert.equal(early.kind, 'other_upstream');
  const order = await env.store.queries.getOrder('shared-ref');
  assert.equal(order?.upstream, 'beta');
  assert.equal(order?.status, 'PROCESSING', "the default upstream's order never becomes beta's");
  assert.equal(order?.pollCount, 0);
  assert.deepEqual(
    (await env.store.queries.listEvents('shared-ref')).map((e) => e.source),
    ['webhook'],
    'nothing but beta’s own word is recorded',
  );
});
