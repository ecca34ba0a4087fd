import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { registerBalanceMetrics } from '../../src/catalog/balance-metrics.js';
import { syncCatalog } from '../../src/catalog/catalog-sync.js';
import { runReconcilePass } from '../../src/reconciler/reconcile-pass.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import {
  createUpstreamOrder,
  type ReconcilerEnv,
  reconcilerEnv,
  simulatorRequestLog,
} from '../helpers/reconciler.js';
import { snapshot, tempStore } from '../helpers/store.js';

const MINUTE = 60_000;
/** BALANCE_DRIFT_THRESHOLD of these tests: under one order's price (MLBB-86, 20,000 in the fixture). */
const THRESHOLD = 5_000;

/** One catalog refresh of the env's upstream, 15 minutes after the last: the store reads its profile. */
async function refresh(env: ReconcilerEnv) {
  env.clock.advance(15 * MINUTE);
  return syncCatalog({ store: env.store, client: env.client, now: env.now });
}

/** The value of a balance gauge of `upstream` at a scrape of `registry`. */
async function gauge(registry: Registry, name: string, upstream = 'default'): Promise<number | undefined> {
  const { values } = await registry.getSingleMetric(name)!.get();
  return values.find((v) => v.labels.upstream === upstream)?.value;
}

test('a refund whose webhooks were all lost drifts the balance: balance.drift once, the audit reads that upstream’s most recent SUCCESS orders first, finds it, and the drift clears', async (t) => {
  const requests = simulatorRequestLog();
  const env = await reconcilerEnv(t, {
    manualClock: true,
    balanceDriftThreshold: THRESHOLD,
    sim: { logger: requests.logger },
  });
  const registry = new Registry();
  registerBalanceMetrics(registry, env.store.balance);
  await refresh(env); // the baseline: nothing expected before it

  // Three delivered orders, the last one refunded upstream with every webhook lost.
  const refs = ['older', 'old', 'refunded'];
  for (const ref of refs) {
    await createUpstreamOrder(env, ref);
    const success = await env.sim.setStatus(ref, { status: 'SUCCESS', serial_number: `SN-${ref}` });
    await env.store.writer.applyOrderSnapshot(success.body, { source: 'webhook', eventId: `e-${ref}` });
    env.clock.advance(MINUTE);
  }
  const price = (await env.store.queries.getOrder('refunded'))!.amount!;
  assert.equal((await env.sim.setStatus('refunded', { status: 'REFUNDED' })).status, 200);

  const first = await refresh(env);
  assert.equal(first.drift?.drift, price, 'the refund came back upstream; h2h-sync did not learn it');
  assert.equal(first.drift?.expected_balance, first.drift!.profile_balance - price);
  assert.equal(first.drift?.audit_steered, true, 'money came back: the audit looks for it at once');
  assert.equal(await gauge(registry, 'h2h_balance_drift'), price);
  assert.equal(
    await gauge(registry, 'h2h_balance_drift_since_timestamp_seconds'),
    Date.parse(first.drift!.read_at) / 1000,
    'the episode began at this read',
  );
  const driftEvents = async () =>
    (await env.store.feed.after(0, 1000)).filter((e) => e.type === 'balance.drift');
  assert.equal((await driftEvents()).length, 0, 'one read only: it may be news still on its way');

  await refresh(env);
  await refresh(env);
  const events = await driftEvents();
  assert.equal(events.length, 1, 'the second read in a row past the threshold, and once per episode');
  assert.deepEqual(
    [events[0]!.data.upstream, events[0]!.data.drift, events[0]!.data.drift_since],
    ['default', price, first.drift!.read_at],
  );

  // Within a day of their check the plain audit would read none of them: the drift steers it.
  const pass = await runReconcilePass(env.deps);
  assert.deepEqual(
    requests.gets(),
    ['refunded'],
    'the most recent final order first; none once the drift is explained',
  );
  assert.deepEqual([pass.audited, pass.auditFound], [1, 1]);
  assert.equal((await env.store.queries.getOrder('refunded'))!.status, 'REFUNDED');
  assert.equal(
    (await env.store.balance.driftOf('default'))!.audit_steered,
    false,
    'the refund found explains it',
  );

  const after = await refresh(env);
  assert.deepEqual(
    [after.drift?.drift, after.drift?.unexplained_drift, after.drift?.drift_since],
    [0, 0, null],
    'the refund the audit found cancels the drift at the next read',
  );
  assert.equal(after.drift?.expected_balance, after.drift?.profile_balance);
  assert.equal(await gauge(registry, 'h2h_balance_drift'), 0);
  assert.equal(await gauge(registry, 'h2h_balance_drift_since_timestamp_seconds'), 0, 'the episode ended');
  assert.equal((await driftEvents()).length, 1, 'no event for the end of an episode');
});

test('the balance gauges: each upstream’s accounted balance, and 1 while it is under the balance.low threshold', async (t) => {
  const { store, clock } = await tempStore(t, { balanceLowThreshold: 50_000 });
  const registry = new Registry();
  registerBalanceMetrics(registry, store.balance);
  assert.equal(await gauge(registry, 'h2h_balance'), undefined, 'nothing before the first profile read');
  await store.catalog.applySync(catalogSnapshot({ readAt: clock.now(), price: 15_000, balance: 60_000 }));
  assert.deepEqual(
    [await gauge(registry, 'h2h_balance'), await gauge(registry, 'h2h_balance_low')],
    [60_000, 0],
  );

  await store.writer.applyOrderSnapshot(snapshot('DEBITED', 'PENDING', { amount: 15_000 }), {
    source: 'create',
  });
  assert.deepEqual(
    [await gauge(registry, 'h2h_balance'), await gauge(registry, 'h2h_balance_low')],
    [45_000, 1],
    'under 50,000: low, as balance.low says',
  );
  assert.equal(await gauge(registry, 'h2h_balance_drift'), 0);
});
