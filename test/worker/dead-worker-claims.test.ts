import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { RateBudget } from '../../src/rate-budget/rate-budget.js';
import { privateRedis } from '../helpers/redis.js';
import { startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { everyOrder, openTestStore, scheduleSettings, tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope, logLines, spawnWorker } from '../helpers/worker.js';

test('two workers on one store: one SIGKILLed while its creates wait for budget slots, the other sends each of its orders exactly once', async (t) => {
  const scope = cleanupScope(t);
  const sim = await startSimulator(scope);
  const redis = await privateRedis(scope);
  const dbPath = tempDbPath(scope);
  // One create per 4 s (a 3 s window plus the budget's 1 s margin), claims of 2 s: every create
  // waits longer than a claim lasts, and a dead worker's claim runs out within 2 s.
  const rate = { H2H_RATE_LIMIT: '1', H2H_RATE_WINDOW_MS: '3000' };
  const env = {
    REDIS_URL: redis.url,
    H2H_DB_PATH: dbPath,
    H2H_BASE_URL: sim.sim.baseUrl,
    H2H_API_KEY: sim.member.api_key,
    ADMIN_PORT: '0',
    RECONCILE_ENABLED: 'true',
    RECONCILE_LEASE_S: '2',
    H2H_CONNECT_TIMEOUT_MS: '300',
    H2H_HEADERS_TIMEOUT_MS: '700',
    // Nothing else draws from the budget: no catalog refresh, no poll of an accepted order.
    CATALOG_REFRESH_S: '0',
    RECONCILE_FIRST_POLL_DELAY_S: '3600',
    ...rate,
  };
  const store = await openTestStore(dbPath, scheduleSettings({ leaseMs: 2_000 }), { now: Date.now });
  scope.after(() => store.close());
  const [doomed, survivor] = await Promise.all([spawnWorker(scope, env), spawnWorker(scope, env)]);

  // The shared budget spent, as the workers count it, before any order is queued.
  const connection = new Redis(redis.url);
  scope.after(() => connection.quit());
  await new RateBudget({
    redis: connection,
    apiKey: sim.member.api_key,
    limit: Number(rate.H2H_RATE_LIMIT),
    windowMs: Number(rate.H2H_RATE_WINDOW_MS),
  }).acquire('create');
  const refs = ['K-1', 'K-2', 'K-3'];
  for (const partnerRef of refs) {
    await store.writer.createLocalOrder({
      partnerRef,
      productCode: 'MLBB-86',
      data: { user_id: userIdEndingIn('0007'), server_id: '2001' },
      queued: true,
    });
  }
  const claimedNow = async () =>
    (
      await store.db.all<{ partner_ref: string }>(
        `SELECT partner_ref FROM orders WHERE submission_state = 'queued' AND poll_leased_until > @now`,
        { now: Date.now() },
      )
    ).map((row) => row.partner_ref);
  const claimed = await waitFor(async () => ((await claimedNow()).length === 2 ? claimedNow() : undefined), {
    message: 'each worker’s pump to claim an order',
  });

  const killed = once(doomed.child, 'exit');
  doomed.child.kill('SIGKILL');
  assert.equal((await killed)[1], 'SIGKILL');
  assert.deepEqual(
    await sim.createRequests(refs),
    { 'K-1': 0, 'K-2': 0, 'K-3': 0 },
    `no create had gone out: both pumps were waiting for a slot with ${claimed.join(', ')} claimed`,
  );

  await waitFor(() => everyOrder(store, refs, (order) => order.submissionState === 'accepted'), {
    timeoutMs: 60_000,
    message: 'every order accepted',
  });
  assert.deepEqual(await sim.createRequests(refs), { 'K-1': 1, 'K-2': 1, 'K-3': 1 }, 'each sent once');
  const acceptedBySurvivor = () =>
    logLines(survivor.output())
      .filter((line) => line.msg === 'order accepted')
      .map((line) => line.partnerRef as string)
      .sort();
  await waitFor(() => acceptedBySurvivor().length >= refs.length, {
    message: 'the surviving worker to log its acceptances',
  });
  assert.deepEqual(acceptedBySurvivor(), refs, 'all by the surviving worker, the dead one’s order too');
  const survivorLog = logLines(survivor.output());
  assert.deepEqual(
    survivorLog.filter((line) => /claim ran out/.test(String(line.msg))),
    [],
    'whose claims held while its creates waited',
  );
});
