import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Queue } from 'bullmq';
import { loadConfig } from '../../src/config/config.js';
import { startWorkerProcess } from '../../src/worker/server.js';
import { privateRedis } from '../helpers/redis.js';
import { openTestStore, scheduleSettings, tempDbPath } from '../helpers/store.js';
import { twoSimulatedUpstreams } from '../helpers/upstreams.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope } from '../helpers/worker.js';

test("a worker with two upstreams refreshes each one's catalog and balance with its own client, on its own scheduler", async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const upstreams = await twoSimulatedUpstreams(t);
  const dbPath = tempDbPath(t);
  const store = await openTestStore(dbPath, scheduleSettings());
  t.after(() => store.close());
  const config = loadConfig({ REDIS_URL: redis.url, H2H_DB_PATH: dbPath, ...upstreams.env });

  const worker = await startWorkerProcess(config);
  t.after(() => worker.close());
  await waitFor(
    async () =>
      (await store.catalog.syncedAt('default')) !== null && (await store.catalog.syncedAt('beta')) !== null,
    { message: "both upstreams' first refresh, at start" },
  );

  assert.deepEqual(
    (await store.catalog.candidates({ code: 'MLBB-86' })).map((c) => [c.upstream, c.price]),
    [
      ['beta', 18_500],
      ['default', 19_500],
    ],
    "each upstream's own price, read with its own key",
  );
  assert.deepEqual(
    (await store.balance.view()).upstreams.map((u) => [u.upstream, u.profile_balance]),
    [
      ['default', 1_000_000],
      ['beta', 150_000],
    ],
    "each upstream's own profile (the fixtures' first members)",
  );
  // The balance gauges, in the registry the admin server's /metrics exposes, per upstream.
  const { registry } = worker.reconcilerMetrics!;
  for (const [name, want] of [
    ['h2h_balance', [1_000_000, 150_000]],
    ['h2h_balance_low', [0, 0]],
    ['h2h_balance_drift', [0, 0]],
  ] as const) {
    const { values } = await registry.getSingleMetric(name)!.get();
    assert.deepEqual(
      ['default', 'beta'].map((upstream) => values.find((v) => v.labels.upstream === upstream)?.value),
      want,
      name,
    );
  }
  for (const [queueName, schedulerId] of [
    ['h2h-catalog', 'h2h-catalog-every'],
    ['h2h-catalog@beta', 'h2h-catalog-every@beta'],
  ]) {
    const queue = new Queue(queueName!, { connection: { url: redis.url } });
    t.after(() => queue.close());
    assert.deepEqual(
      (await queue.getJobSchedulers()).map((s) => s.key),
      [schedulerId],
      `${queueName}'s scheduler`,
    );
  }
});
