import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runReconcilePass } from '../../src/reconciler/reconcile-pass.js';
import { createUpstreamOrder, reconcilerEnv } from '../helpers/reconciler.js';

test('orders that fail on every poll get their own backoff and go behind the others, so they never starve the rest', async (t) => {
  const env = await reconcilerEnv(t, { manualClock: true, settings: { backoffMs: [60_000] } });
  // The three failing orders are the longest due: today's head of the line.
  const failing = ['bad-1', 'bad-2', 'bad-3'];
  const healthy = ['ok-1', 'ok-2', 'ok-3', 'ok-4', 'ok-5'];
  for (const ref of [...failing, ...healthy]) {
    await createUpstreamOrder(env, ref, '0001');
    env.clock.advance(1);
  }
  await env.sim.setFaults({ order_read_errors: failing });
  env.clock.advance(env.settings.firstPollDelayMs);

  const passes = [];
  for (let i = 0; i < 3; i++) {
    passes.push(await runReconcilePass(env.deps));
    env.clock.advance(1000);
  }

  for (const ref of healthy) {
    const order = (await env.store.queries.getOrder(ref))!;
    assert.equal(order.status, 'SUCCESS', `${ref} was polled despite the failing orders ahead of it`);
  }
  for (const ref of failing) {
    const order = (await env.store.queries.getOrder(ref))!;
    assert.equal(order.status, 'PENDING');
    assert.ok(order.nextPollAt! > env.now(), `${ref} waits for its own backoff, behind the others`);
    assert.equal(order.pollCount, 1, `${ref} failed once, then waited`);
  }
  assert.equal(passes.at(-1)!.stoppedBy, 'done');
});

test('orders failing among healthy ones are each put on their own backoff, and the pass goes on: one order is no cause to stop', async (t) => {
  const env = await reconcilerEnv(t, { manualClock: true, settings: { backoffMs: [60_000] } });
  const refs = ['bad-1', 'ok-1', 'bad-2', 'ok-2', 'bad-3', 'ok-3', 'bad-4', 'ok-4'];
  for (const ref of refs) {
    await createUpstreamOrder(env, ref, '0001');
    env.clock.advance(1);
  }
  await env.sim.setFaults({ order_read_errors: refs.filter((ref) => ref.startsWith('bad')) });
  env.clock.advance(env.settings.firstPollDelayMs);

  const summary = await runReconcilePass(env.deps);

  assert.deepEqual([summary.stoppedBy, summary.checked, summary.errors], ['done', 4, 4]);
  assert.equal(summary.circuit, null, 'the circuit stays closed');
  assert.equal(summary.dueAfter, 0, 'every failing order waits for its backoff');
});
