import assert from 'node:assert/strict';
import { test } from 'node:test';
import { placeOrder } from '../../src/orders/place-order.js';
import { runReconcilePass } from '../../src/reconciler/reconcile-pass.js';
import { differencesFromSimulator, reconcilerEnv, targetFor } from '../helpers/reconciler.js';

const PRICE = 19_500; // MLBB-86 at reseller prices

test('unknown submissions are resolved with exactly one upstream order and one debit each: adopted when the upstream has them, resubmitted with the same partner_ref when it answers 404', async (t) => {
  const env = await reconcilerEnv(t);
  const before = await env.sim.balance();
  const place = (partnerRef: string) =>
    placeOrder(
      { client: env.client, store: env.store },
      { productCode: 'MLBB-86', data: targetFor('0007'), partnerRef },
    );

  // The create commits upstream but its answer is lost, on every attempt.
  await env.sim.setFaults({ create_drop_response: 1 });
  const dropped = ['drop-1', 'drop-2', 'drop-3', 'drop-4'];
  for (const ref of dropped) assert.equal((await place(ref)).outcome, 'unknown');
  // The create never reaches the order book.
  await env.sim.setFaults({ create_drop_response: 0, error_5xx: 1 });
  const refused = ['fail-1', 'fail-2', 'fail-3'];
  for (const ref of refused) assert.equal((await place(ref)).outcome, 'unknown');
  await env.sim.setFaults({ error_5xx: 0 });
  assert.equal((await env.sim.allOrders()).length, dropped.length);

  const summary = await runReconcilePass(env.deps);

  assert.equal(summary.checked, 7);
  assert.equal(summary.resubmitted, refused.length);
  const upstream = await env.sim.allOrders();
  assert.deepEqual(
    upstream.map((o) => o.partner_ref).sort(),
    [...dropped, ...refused].sort(),
    'one order per partner_ref',
  );
  assert.equal(before - (await env.sim.balance()), 7 * PRICE, 'one debit each');
  for (const ref of [...dropped, ...refused]) {
    assert.equal((await env.store.queries.getOrder(ref))!.submissionState, 'accepted', ref);
  }
  assert.deepEqual(await differencesFromSimulator(env.store, env.sim), []);
  // Adopted: the poll brought the order. Resubmitted: the repeated create did.
  const changedBy = async (ref: string) =>
    (await env.store.queries.listEvents(ref))
      .filter((e) => e.changed && e.status !== null)
      .map((e) => e.source);
  assert.deepEqual(await changedBy('drop-1'), ['poll']);
  assert.deepEqual(await changedBy('fail-1'), ['create']);
});

test('a pending submission whose placing process died is submitted again with its own partner_ref once its first poll is due', async (t) => {
  const env = await reconcilerEnv(t, { manualClock: true });
  await env.store.writer.createLocalOrder({
    partnerRef: 'orphan-1',
    productCode: 'MLBB-86',
    data: targetFor('0001'),
  });
  assert.equal((await env.store.queries.getOrder('orphan-1'))!.submissionState, 'pending');

  const early = await runReconcilePass(env.deps);
  assert.equal(early.checked, 0, 'not due before the first-poll delay');

  env.clock.advance(env.settings.firstPollDelayMs);
  const due = await runReconcilePass(env.deps);

  assert.equal(due.resubmitted, 1);
  const [order] = await env.sim.allOrders();
  assert.equal(order?.partner_ref, 'orphan-1');
  assert.equal((await env.store.queries.getOrder('orphan-1'))!.invoiceNumber, order?.invoice_number);
});
