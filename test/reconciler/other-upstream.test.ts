import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sendClaimedOrder } from '../../src/orders/place-order.js';
import { pollOrderNow } from '../../src/reconciler/early-poll.js';
import { runReconcilePass } from '../../src/reconciler/reconcile-pass.js';
import { withClaims } from '../../src/store/order-store.js';
import { reconcilerEnv, targetFor } from '../helpers/reconciler.js';
import { snapshot } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';

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

test("with beta's claims and client, a create answer and a poll answer are beta's and apply to beta's order", async (t) => {
  // The simulator plays beta here: its client is the one beta's claims go with.
  const env = await reconcilerEnv(t);
  const beta = withClaims(env.store, env.settings, 'beta');
  const deps = { ...env.deps, store: beta };
  await env.store.writer.createLocalOrder({
    partnerRef: 'beta-1',
    productCode: 'MLBB-86',
    data: targetFor('0001'),
    upstream: 'beta',
  });

  const claim = await beta.claims.claimOrder('beta-1');
  assert.equal(claim?.claimed, true);
  const placed = await sendClaimedOrder(deps, claim!.order);
  await beta.claims.releaseClaim('beta-1', claim!.order.claim);
  const truth = await waitFor(async () =>
    (await env.sim.allOrders()).find((o) => o.partner_ref === 'beta-1' && o.status === 'SUCCESS'),
  );
  const polled = await pollOrderNow(deps, 'beta-1');

  assert.equal(placed.outcome, 'accepted');
  assert.equal(polled.kind, 'polled');
  const order = await env.store.queries.getOrder('beta-1');
  assert.deepEqual(
    [order?.upstream, order?.status, order?.serialNumber],
    ['beta', 'SUCCESS', truth.serial_number],
  );
  assert.deepEqual(
    (await env.store.queries.listEvents('beta-1')).map((e) => [e.source, e.reason === 'wrong_upstream']),
    [
      ['create', false],
      ['poll', false],
    ],
  );
});
