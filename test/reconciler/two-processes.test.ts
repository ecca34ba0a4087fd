import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { placeOrder } from '../../src/orders/place-order.js';
import type { ReconcilerProcessConfig, ReconcilerProcessReport } from '../fixtures/reconciler-process.js';
import { FIXTURE_EXEC_ARGV } from '../helpers/fixture-process.js';
import {
  differencesFromSimulator,
  reconcilerEnv,
  simulatorRequestLog,
  targetFor,
} from '../helpers/reconciler.js';
import { everyOrder, nextMessage } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';

const CHILD = fileURLToPath(new URL('../fixtures/reconciler-process.ts', import.meta.url));

test('two reconciler processes on one store and Redis run one pass at a time, poll no order twice, and meet no 429', async (t) => {
  // The simulator allows 20 calls per rolling 2 s; the budget the same, with polls capped at 15.
  const budget = { limit: 20, windowMs: 2000, marginMs: 100, reservedForCreate: 5 };
  const requests = simulatorRequestLog();
  const env = await reconcilerEnv(t, {
    sim: {
      timeScale: 0.001,
      rateLimit: budget.limit,
      rateWindowMs: budget.windowMs,
      logger: requests.logger,
    },
    budget,
    // Final orders are settled by their first poll; PENDING ones are not due again within the test.
    settings: { firstPollDelayMs: 300, backoffMs: [600_000], everyMs: 200 },
  });
  await env.sim.setFaults({ webhook_drop: 1 });

  const children = [0, 1].map(() => fork(CHILD, [], { execArgv: FIXTURE_EXEC_ARGV, stdio: 'inherit' }));
  t.after(() => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  });
  const config: ReconcilerProcessConfig = {
    dbPath: env.dbPath,
    redisUrl: env.redis.url,
    baseUrl: env.sim.sim.baseUrl,
    apiKey: env.sim.member.api_key,
    budget,
    settings: env.settings,
    loopPauseMs: 20,
  };
  for (const child of children) child.send(config);
  await Promise.all(children.map((child) => nextMessage<string>(child)));

  const suffixes = ['0001', '0002', '0003', '0004', '0005', '0006'];
  const refs: string[] = [];
  for (let i = 0; i < 24; i++) {
    const suffix = i < 18 ? suffixes[i % suffixes.length]! : '0007';
    const placed = await placeOrder(
      { client: env.client, store: env.store },
      {
        productCode: 'MLBB-86',
        data: targetFor(suffix),
        partnerRef: `two-${String(i).padStart(2, '0')}-${suffix}`,
      },
    );
    assert.equal(placed.outcome, 'accepted');
    refs.push(placed.order.partnerRef);
  }

  await waitFor(
    async () =>
      (await everyOrder(env.store, refs, (order) => order.lastPolledAt !== null)) &&
      (await differencesFromSimulator(env.store, env.sim, refs)).length === 0,
    { timeoutMs: 30_000, message: 'every order polled and equal to the upstream' },
  );
  const reports = await Promise.all(
    children.map((child) => {
      const report = nextMessage<ReconcilerProcessReport>(child);
      child.send('stop');
      return report;
    }),
  );

  const gets = requests.getsByRef();
  assert.deepEqual(
    refs.filter((ref) => gets.get(ref) !== 1),
    [],
    'every order was polled exactly once, by one of the two processes',
  );
  assert.equal(requests.statuses().get(429) ?? 0, 0, 'the upstream never answered 429');

  const ran = reports.flatMap((r) =>
    r.passes.filter((p) => p.stoppedBy !== 'locked').map((p) => ({ ...p, pid: r.pid })),
  );
  const skipped = reports.flatMap((r) => r.passes.filter((p) => p.stoppedBy === 'locked'));
  assert.ok(
    reports.every((r) => r.passes.some((p) => p.stoppedBy !== 'locked')),
    'both processes ran passes',
  );
  assert.ok(skipped.length > 0, 'and found the lock held by the other at times');
  ran.sort((a, b) => a.startedAt - b.startedAt);
  for (let i = 1; i < ran.length; i++) {
    const [before, after] = [ran[i - 1]!, ran[i]!];
    assert.ok(
      after.startedAt >= before.finishedAt,
      `passes overlap: ${JSON.stringify([before, after].map((p) => [p.pid, p.startedAt, p.finishedAt]))}`,
    );
  }
  const polled = ran.reduce((sum, p) => sum + p.checked, 0);
  assert.equal(polled, refs.length, 'the passes together checked each order once');
});
