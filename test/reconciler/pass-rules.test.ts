import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CIRCUIT_OPENS_AFTER } from '../../src/reconciler/circuit.js';
import { runReconcilePass } from '../../src/reconciler/reconcile-pass.js';
import { RedisLease } from '../../src/shared/redis-lease.js';
import { createUpstreamOrder, metricValue, reconcilerEnv } from '../helpers/reconciler.js';
import { openTestStore, snapshot } from '../helpers/store.js';

const HOUR = 3_600_000;

test('a pass polls due orders oldest-due first and ends when the poll share of the budget is spent; the rest keep their place', async (t) => {
  // limit 6 with 2 kept for creation: polling may use 4 per window.
  const env = await reconcilerEnv(t, {
    manualClock: true,
    budget: { limit: 6, reservedForCreate: 2, windowMs: 60_000 },
  });
  const refs = Array.from({ length: 10 }, (_, i) => `due-${i}`);
  for (const ref of refs) {
    await createUpstreamOrder(env, ref);
    env.clock.advance(1);
  }
  // The pass comes 90 s after the orders fell due: each poll is that late.
  env.clock.advance(env.settings.firstPollDelayMs + 90_000);
  const before = new Map<string, number | null>();
  for (const ref of refs) before.set(ref, (await env.store.queries.getOrder(ref))!.nextPollAt);

  const summary = await runReconcilePass(env.deps, { budget: env.budget });

  assert.equal(summary.stoppedBy, 'budget');
  assert.equal(summary.checked, 4);
  assert.ok(summary.retryAfterMs! > 0);
  assert.equal(summary.budget?.poll, 4);
  assert.equal(summary.dueAfter, 6);
  assert.deepEqual(
    (
      await Promise.all(
        refs.map(async (ref) =>
          (await env.store.queries.getOrder(ref))!.lastPolledAt !== null ? ref : null,
        ),
      )
    ).filter((ref) => ref !== null),
    refs.slice(0, 4),
    'the four longest-due went first',
  );
  for (const ref of refs.slice(4)) {
    assert.equal(
      (await env.store.queries.getOrder(ref))!.nextPollAt,
      before.get(ref),
      `${ref} keeps its place`,
    );
  }
  assert.deepEqual(
    (await env.store.claims.claimDueForPoll(10)).map((o) => o.partnerRef),
    refs.slice(4),
    'and nothing is left claimed',
  );
  const lateness = await env.metrics.registry.getSingleMetric('h2h_reconcile_poll_lateness_seconds')!.get();
  const value = (suffix: string) =>
    lateness.values.find((v) => (v as { metricName?: string }).metricName?.endsWith(suffix))?.value;
  assert.equal(value('_count'), 4, 'one observation per poll');
  // due-0 … due-3 fell due 10, 9, 8 and 7 ms before the 90 s.
  assert.equal(value('_sum'), 4 * 90 + (10 + 9 + 8 + 7) / 1000);
});

test('polling backs off 1st, 2nd, 3rd … interval while nothing changes, and starts over after a change by webhook or by poll', async (t) => {
  const env = await reconcilerEnv(t, { manualClock: true, settings: { backoffMs: [1000, 2000, 5000] } });
  await createUpstreamOrder(env, 'slow-1');
  const delays: number[] = [];
  const pollAndRecordDelay = async () => {
    const due = (await env.store.queries.getOrder('slow-1'))!.nextPollAt!;
    env.clock.advance(due - env.now());
    const summary = await runReconcilePass(env.deps);
    assert.equal(summary.checked, 1);
    delays.push((await env.store.queries.getOrder('slow-1'))!.nextPollAt! - env.now());
  };

  for (let i = 0; i < 4; i++) await pollAndRecordDelay();
  assert.deepEqual(delays, [1000, 2000, 5000, 5000], 'growing, capped at the last');
  assert.equal((await env.store.queries.getOrder('slow-1'))!.pollCount, 4);

  // A webhook moves the order: the store puts the next poll at the first-poll delay.
  const moved = await env.sim.setStatus('slow-1', { status: 'PROCESSING' });
  await env.store.writer.applyOrderSnapshot(moved.body, { source: 'webhook', eventId: 'evt-1' });
  assert.equal(
    (await env.store.queries.getOrder('slow-1'))!.nextPollAt! - env.now(),
    env.settings.firstPollDelayMs,
  );
  await pollAndRecordDelay();
  assert.equal(delays.at(-1), 1000, 'the backoff starts over after a webhook change');

  // A lost webhook: the poll itself finds the change, and the backoff starts over too.
  await pollAndRecordDelay();
  await env.sim.setStatus('slow-1', { status: 'SUCCESS' });
  await pollAndRecordDelay();
  assert.equal(delays.at(-1), env.settings.firstPollDelayMs, 'a SUCCESS without serial is polled again soon');
  assert.equal((await env.store.queries.getOrder('slow-1'))!.pollCount, 0);
  await pollAndRecordDelay();
  assert.equal(delays.at(-1), 1000);
});

test('an order open longer than the maximum age is marked stuck, counted, and polled at the longest interval', async (t) => {
  const env = await reconcilerEnv(t, {
    manualClock: true,
    settings: { backoffMs: [60_000, 3_600_000], stuckAfterMs: 48 * HOUR },
  });
  await createUpstreamOrder(env, 'old-1');
  await createUpstreamOrder(env, 'young-1');
  env.clock.advance(48 * HOUR - 1000);
  await env.store.writer.applyOrderSnapshot(snapshot('young-2', 'PENDING'), {
    source: 'webhook',
    eventId: 'e-young',
  });
  env.clock.advance(1000);

  const summary = await runReconcilePass(env.deps);

  const old = (await env.store.queries.getOrder('old-1'))!;
  assert.equal(old.stuckAt, env.now());
  assert.equal(old.nextPollAt, env.now() + 3_600_000);
  assert.equal(
    (await env.store.queries.getOrder('young-1'))!.stuckAt,
    env.now(),
    'created at the same time as old-1',
  );
  assert.equal(summary.stuck, 2);
  assert.equal((await env.store.queries.countByStatus()).stuck, 2);
  assert.equal(await metricValue(env.metrics, 'h2h_reconcile_stuck_orders'), 2);
  assert.ok(env.log.records().some((l) => l.msg?.toString().startsWith('order marked stuck')));
});

test('401 opens the circuit with the upstream code and the fix; the order keeps its place; each later pass probes once, and the circuit closes when the key works again', async (t) => {
  const env = await reconcilerEnv(t, { manualClock: true });
  await createUpstreamOrder(env, 'auth-1');
  await createUpstreamOrder(env, 'auth-2');
  env.clock.advance(env.settings.firstPollDelayMs);
  await env.sim.patchMember('M-0001', { h2h_enabled: false });

  const summary = await runReconcilePass(env.deps);

  assert.equal(summary.stoppedBy, 'unauthorized');
  assert.equal(summary.error?.code, 'INVALID_API_KEY');
  assert.match(summary.error?.fix ?? '', /H2H_API_KEY/);
  assert.equal(summary.checked, 0);
  assert.equal(summary.errors, 1);
  assert.equal(summary.dueAfter, 2);
  assert.deepEqual(
    [summary.circuit?.cause, summary.circuit?.code],
    ['unauthorized', 'INVALID_API_KEY'],
    'the circuit is open, and says why',
  );
  assert.equal((await env.store.queries.getOrder('auth-1'))!.lastPolledAt, null);
  assert.equal(
    (await env.store.queries.getOrder('auth-1'))!.pollCount,
    0,
    'not the order’s fault: no backoff',
  );
  assert.ok(env.log.records().some((l) => l.level === 50 && /INVALID_API_KEY/.test(String(l.msg))));
  assert.equal(await metricValue(env.metrics, 'h2h_reconcile_circuit_open', { cause: 'unauthorized' }), 1);

  const probed = await runReconcilePass(env.deps);
  assert.deepEqual(
    [probed.stoppedBy, probed.probe, probed.calls, probed.checked],
    ['unauthorized', 'failed', 1, 0],
    'one probe, no poll',
  );
  assert.equal(probed.circuit?.probes, 1);

  await env.sim.patchMember('M-0001', { h2h_enabled: true });
  const resumed = await runReconcilePass(env.deps);
  assert.deepEqual([resumed.probe, resumed.checked, resumed.stoppedBy], ['ok', 2, 'done']);
  assert.equal(resumed.circuit, null);
  assert.equal(await env.store.circuit.state(), null);
  assert.equal(await metricValue(env.metrics, 'h2h_reconcile_circuit_open', { cause: 'unauthorized' }), 0);
  assert.ok(env.log.records().some((l) => /circuit closed/.test(String(l.msg))));
});

test('429 from the upstream ends the pass without losing the order’s place', async (t) => {
  // The simulator allows 3 calls a minute, the budget far more: the two creates and one poll pass.
  const env = await reconcilerEnv(t, {
    manualClock: true,
    sim: { rateLimit: 3, rateWindowMs: 60_000 },
    client: { retry: { maxAttempts: 1 } },
  });
  for (const ref of ['rl-1', 'rl-2']) await createUpstreamOrder(env, ref);
  env.clock.advance(env.settings.firstPollDelayMs);
  const place = (await env.store.queries.getOrder('rl-2'))!.nextPollAt;

  const summary = await runReconcilePass(env.deps);

  assert.equal(summary.stoppedBy, 'rate_limited');
  assert.equal(summary.error?.code, 'TOO_MANY_REQUESTS');
  assert.equal(summary.checked, 1);
  assert.equal((await env.store.queries.getOrder('rl-2'))!.lastPolledAt, null);
  assert.equal((await env.store.queries.getOrder('rl-2'))!.nextPollAt, place);
  assert.equal(summary.dueAfter, 1);
});

test(`5xx for ${CIRCUIT_OPENS_AFTER} different orders in a row opens the circuit: those orders back off, the rest keep their place, and a probe closes it once the upstream answers`, async (t) => {
  const env = await reconcilerEnv(t, { manualClock: true });
  const refs = ['f-1', 'f-2', 'f-3', 'f-4', 'f-5'];
  for (const ref of refs) await createUpstreamOrder(env, ref);
  env.clock.advance(env.settings.firstPollDelayMs);
  await env.sim.setFaults({ error_5xx: 1 });

  const summary = await runReconcilePass(env.deps);

  assert.equal(summary.stoppedBy, 'upstream_failing');
  assert.equal(summary.errors, CIRCUIT_OPENS_AFTER);
  assert.equal(summary.error?.code, 'SERVICE_UNAVAILABLE');
  assert.equal(summary.calls, CIRCUIT_OPENS_AFTER * 2, 'each order once, with the client’s retry');
  assert.equal(await metricValue(env.metrics, 'h2h_reconcile_polls_total', { outcome: 'upstream_error' }), 3);
  assert.equal(summary.circuit?.cause, 'upstream_failing');
  assert.equal(
    await metricValue(env.metrics, 'h2h_reconcile_circuit_open', { cause: 'upstream_failing' }),
    1,
  );
  for (const ref of refs.slice(0, 3)) {
    const order = (await env.store.queries.getOrder(ref))!;
    assert.deepEqual(
      [order.pollCount, order.nextPollAt],
      [1, env.now() + env.settings.backoffMs[0]!],
      `${ref} is on its own backoff`,
    );
  }
  for (const ref of refs.slice(3)) {
    assert.equal((await env.store.queries.getOrder(ref))!.pollCount, 0, `${ref} keeps its place`);
  }

  const probed = await runReconcilePass(env.deps);
  assert.deepEqual([probed.stoppedBy, probed.probe, probed.checked], ['upstream_failing', 'failed', 0]);
  assert.equal(probed.calls, 2, 'only the probe, with its retry');

  await env.sim.setFaults({ error_5xx: 0 });
  env.clock.advance(env.settings.backoffMs[0]!);
  const next = await runReconcilePass(env.deps);
  assert.equal(next.probe, 'ok');
  assert.equal(next.checked, 5);
  assert.equal(next.stoppedBy, 'done');
  assert.equal(next.circuit, null);
  assert.ok(
    env.log.records().some((l) => l.level === 40 && /circuit open \(upstream_failing\)/.test(String(l.msg))),
  );
});

test('a 404 for an order the upstream had confirmed is an anomaly: logged at error, counted, and polled again later', async (t) => {
  const env = await reconcilerEnv(t, { manualClock: true });
  await env.store.writer.applyOrderSnapshot(snapshot('ghost-1', 'PENDING'), {
    source: 'webhook',
    eventId: 'e-ghost',
  });
  env.clock.advance(env.settings.firstPollDelayMs);

  const summary = await runReconcilePass(env.deps);

  assert.equal(summary.anomalies, 1);
  assert.equal(summary.checked, 1);
  assert.equal(
    await metricValue(env.metrics, 'h2h_reconcile_anomalies_total', { kind: 'confirmed_order_not_found' }),
    1,
  );
  const ghost = (await env.store.queries.getOrder('ghost-1'))!;
  assert.equal(ghost.nextPollAt, env.now() + env.settings.backoffMs[0]!);
  assert.equal(ghost.submissionState, 'accepted');
  assert.ok(
    env.log
      .records()
      .some((l) => l.level === 50 && l.partnerRef === 'ghost-1' && /anomaly/.test(String(l.msg))),
  );
  assert.equal((await env.sim.allOrders()).length, 0, 'never created again under its ref');
});

test('claims are exclusive across connections, end with the poll or a release, and expire with their lease', async (t) => {
  const env = await reconcilerEnv(t, { manualClock: true, settings: { leaseMs: 5000 } });
  const other = await openTestStore(env.dbPath, env.settings, { now: env.clock.now });
  t.after(() => other.close());
  for (const ref of ['c-1', 'c-2', 'c-3', 'c-4'])
    await env.store.writer.applyOrderSnapshot(snapshot(ref, 'PENDING'), { source: 'create' });
  env.clock.advance(env.settings.firstPollDelayMs);

  const mineClaimed = await env.store.claims.claimDueForPoll(2);
  const mine = mineClaimed.map((o) => o.partnerRef);
  const theirs = (await other.claims.claimDueForPoll(10)).map((o) => o.partnerRef);
  assert.deepEqual(mine, ['c-1', 'c-2']);
  assert.deepEqual(theirs, ['c-3', 'c-4']);
  assert.equal(
    (await env.store.claims.claimOrder('c-3'))?.claimed,
    false,
    'an early poll waits for the holder',
  );

  await env.store.claims.releaseClaim('c-1', mineClaimed[0]!.claim);
  await other.claims.recordPoll('c-3');
  env.clock.advance(env.settings.backoffMs[0]!); // c-3 is due again after the first backoff interval
  assert.deepEqual(
    (await env.store.claims.claimDueForPoll(10)).map((o) => o.partnerRef),
    ['c-1', 'c-3'],
  );
  env.clock.advance(5000);
  assert.deepEqual(
    (await other.claims.claimDueForPoll(10)).map((o) => o.partnerRef),
    ['c-1', 'c-2', 'c-4', 'c-3'], // longest-due first: c-3's poll moved it back by the backoff
    'every lease expired',
  );
});

test('the pass lock lets one pass run at a time; a second pass finds it held and does nothing', async (t) => {
  const env = await reconcilerEnv(t, { manualClock: true });
  await createUpstreamOrder(env, 'lock-1');
  env.clock.advance(env.settings.firstPollDelayMs);
  const lock = new RedisLease(env.redisClient, { key: 'test:pass-lock' });
  const held = await lock.acquire();
  assert.ok(held);

  const skipped = await runReconcilePass(env.deps, { lock });
  assert.equal(skipped.stoppedBy, 'locked');
  assert.equal(skipped.lockHolder, held.token);
  assert.equal((await env.store.queries.getOrder('lock-1'))!.lastPolledAt, null);

  await held.release();
  const ran = await runReconcilePass(env.deps, { lock });
  assert.equal(ran.checked, 1);
  assert.equal(await lock.holder(), null, 'released after the pass');
});

test('a SUCCESS without a serial follows the backoff to its cap, is marked stuck after the maximum age and polled no more; a late serial still applies', async (t) => {
  const env = await reconcilerEnv(t, {
    manualClock: true,
    settings: { backoffMs: [1000, 2000], stuckAfterMs: 10_000 },
  });
  await createUpstreamOrder(env, 'no-serial-1');
  await env.sim.setStatus('no-serial-1', { status: 'SUCCESS' }); // its webhook is lost
  const delays: number[] = [];
  for (let i = 0; i < 50 && (await env.store.queries.getOrder('no-serial-1'))!.nextPollAt !== null; i++) {
    env.clock.advance((await env.store.queries.getOrder('no-serial-1'))!.nextPollAt! - env.now());
    await runReconcilePass(env.deps);
    const next = (await env.store.queries.getOrder('no-serial-1'))!.nextPollAt;
    delays.push(next === null ? 0 : next - env.now());
  }

  const order = (await env.store.queries.getOrder('no-serial-1'))!;
  assert.equal(order.nextPollAt, null, `polled no more after ${delays.length} polls: ${delays.join(', ')}`);
  assert.deepEqual(
    delays,
    [env.settings.firstPollDelayMs, 1000, 2000, 2000, 2000, 2000, 2000, 0],
    'the first poll finds SUCCESS (a change), then the backoff to its cap, until the order is 10 s old',
  );
  assert.equal(order.status, 'SUCCESS');
  assert.equal(order.stuckAt, env.now());
  assert.equal((await env.store.queries.countByStatus()).stuck, 1, 'counted as stuck');
  assert.ok(env.log.records().some((l) => /without a serial/.test(String(l.msg))));

  const serial = await env.sim.setStatus('no-serial-1', { status: 'SUCCESS', serial_number: 'SN-LATE' });
  const late = await env.store.writer.applyOrderSnapshot(serial.body, {
    source: 'webhook',
    eventId: 'e-late',
  });
  assert.deepEqual([late.changed, late.reason, late.order.serialNumber], [true, 'serial_added', 'SN-LATE']);
  assert.equal((await env.store.queries.countByStatus()).stuck, 0, 'complete now');
});
