import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runReconcilePass } from '../../src/reconciler/reconcile-pass.js';
import {
  createUpstreamOrder,
  metricValue,
  type ReconcilerEnv,
  reconcilerEnv,
  simulatorRequestLog,
} from '../helpers/reconciler.js';

const DAY = 86_400_000;

/** An order that reached SUCCESS with its serial by webhook, then was refunded upstream with every webhook lost. */
async function refundedWithWebhooksLost(env: ReconcilerEnv, ref: string): Promise<void> {
  await createUpstreamOrder(env, ref);
  const success = await env.sim.setStatus(ref, { status: 'SUCCESS', serial_number: `SN-${ref}` });
  await env.store.writer.applyOrderSnapshot(success.body, { source: 'webhook', eventId: `e-${ref}` });
  assert.equal((await env.sim.setStatus(ref, { status: 'REFUNDED' })).status, 200);
}

test('a refund whose webhooks were all lost is found by the audit from idle budget, logged and counted', async (t) => {
  const env = await reconcilerEnv(t, { manualClock: true });
  await refundedWithWebhooksLost(env, 'refund-1');
  assert.equal((await env.store.queries.getOrder('refund-1'))!.nextPollAt, null, 'settled: no due poll');

  const soon = await runReconcilePass(env.deps);
  assert.equal(soon.audited, 0, 'checked when it became final: not again within a day');
  env.clock.advance(DAY);
  assert.deepEqual(await env.store.queries.auditCoverage(env.settings.auditWindowMs), {
    successOrders: 1,
    checkedLastDay: 0,
  });

  const summary = await runReconcilePass(env.deps);

  assert.deepEqual([summary.audited, summary.auditFound, summary.stoppedBy], [1, 1, 'done']);
  const order = (await env.store.queries.getOrder('refund-1'))!;
  assert.equal(order.status, 'REFUNDED');
  assert.equal(order.nextPollAt, null);
  assert.equal(await metricValue(env.metrics, 'h2h_reconcile_audit_refunds_found_total'), 1);
  assert.equal(await metricValue(env.metrics, 'h2h_reconcile_audit_reads_total', { outcome: 'changed' }), 1);
  assert.equal(await metricValue(env.metrics, 'h2h_reconcile_polls_total', { outcome: 'changed' }), 0);
  assert.ok(
    env.log
      .records()
      .some(
        (l) => l.level === 40 && l.partnerRef === 'refund-1' && /audit found a refund/.test(String(l.msg)),
      ),
  );
  assert.deepEqual((await env.store.queries.listEvents('refund-1')).at(-1)?.status, 'REFUNDED');
});

test('the audit reads the least recently checked SUCCESS orders of its window first, each at most once a day, and shows its coverage', async (t) => {
  const requests = simulatorRequestLog();
  const env = await reconcilerEnv(t, {
    manualClock: true,
    settings: { auditWindowMs: 3 * DAY },
    sim: { logger: requests.logger },
  });
  for (const ref of ['old', 'mid', 'new']) {
    await createUpstreamOrder(env, ref);
    const success = await env.sim.setStatus(ref, { status: 'SUCCESS', serial_number: `SN-${ref}` });
    await env.store.writer.applyOrderSnapshot(success.body, { source: 'webhook', eventId: `e-${ref}` });
    env.clock.advance(DAY);
  }
  // old became final 3 days ago (at the window's edge), mid 2 days ago, new 1 day ago.

  const first = await runReconcilePass(env.deps);
  const second = await runReconcilePass(env.deps);
  env.clock.advance(DAY);
  const third = await runReconcilePass(env.deps);

  assert.equal(first.audited, 3, 'old, mid and new, each checked at least a day ago');
  assert.equal(second.audited, 0, 'none again within a day');
  assert.equal(third.audited, 2, 'a day later: mid and new; old has left the 3-day window');
  assert.deepEqual(requests.gets(), ['old', 'mid', 'new', 'mid', 'new']);
  assert.equal((await env.store.queries.getOrder('old'))!.lastPolledAt, env.now() - DAY);
  assert.deepEqual(await env.store.queries.auditCoverage(env.settings.auditWindowMs), {
    successOrders: 2,
    checkedLastDay: 2,
  });
  assert.equal(await metricValue(env.metrics, 'h2h_reconcile_audit_coverage'), 1);
});

test('the audit costs nothing while the budget is busy: due polls go first, and it never reads once the window holds creation’s reserve and the polls’ headroom', async (t) => {
  const requests = simulatorRequestLog();
  // 12 calls a window: 4 kept for creation, 2 more for due polls; the audit only below 6.
  const env = await reconcilerEnv(t, {
    manualClock: true,
    sim: { logger: requests.logger },
    budget: { limit: 12, reservedForCreate: 4, reservedForPolls: 2, windowMs: 60_000 },
  });
  const settled = ['s-1', 's-2', 's-3'];
  for (const ref of settled) await refundedWithWebhooksLost(env, ref);
  env.clock.advance(DAY);
  const due = ['d-1', 'd-2', 'd-3', 'd-4'];
  for (const ref of due) await createUpstreamOrder(env, ref);
  env.clock.advance(env.settings.firstPollDelayMs);

  const summary = await runReconcilePass(env.deps, { budget: env.budget });

  assert.deepEqual(requests.gets(), [...due, 's-1', 's-2'], 'every due order first; then idle capacity only');
  assert.deepEqual([summary.checked, summary.audited, summary.stoppedBy], [4, 2, 'done']);
  const used = await env.budget.used();
  assert.deepEqual([used.poll, used.audit, used.used], [4, 2, 6], 'the audit stopped at 6 of 12');
  assert.ok(await env.budget.tryAcquire('poll'), 'a due poll still finds a slot');
  assert.equal((await env.store.queries.getOrder('s-3'))!.status, 'SUCCESS', 'read another time');
});

test('with the poll share spent by due polls, or the window already busy, the audit makes no read at all', async (t) => {
  const requests = simulatorRequestLog();
  const env = await reconcilerEnv(t, {
    manualClock: true,
    sim: { logger: requests.logger },
    budget: { limit: 12, reservedForCreate: 4, reservedForPolls: 2, windowMs: 60_000 },
  });
  await refundedWithWebhooksLost(env, 'settled-1');
  env.clock.advance(DAY);
  const due = Array.from({ length: 10 }, (_, i) => `due-${i}`);
  for (const ref of due) await createUpstreamOrder(env, ref);
  env.clock.advance(env.settings.firstPollDelayMs);

  const spent = await runReconcilePass(env.deps, { budget: env.budget });
  assert.deepEqual([spent.stoppedBy, spent.checked, spent.audited], ['budget', 8, 0]);
  assert.equal(requests.gets().includes('settled-1'), false);

  // A fresh window busy with order creation: nothing is due, yet the audit still reads nothing.
  await env.redisClient.del(env.budget.key);
  for (let i = 0; i < 6; i++) assert.ok(await env.budget.tryAcquire('create'));
  for (const ref of due.slice(8)) await env.store.claims.recordPoll(ref); // nothing due any more
  const before = requests.gets().length;
  const busy = await runReconcilePass(env.deps, { budget: env.budget });
  assert.deepEqual([busy.stoppedBy, busy.checked, busy.audited, busy.calls], ['done', 0, 0, 0]);
  assert.equal(requests.gets().length, before, 'zero audit reads');
  assert.equal((await env.store.queries.getOrder('settled-1'))!.status, 'SUCCESS');
});
