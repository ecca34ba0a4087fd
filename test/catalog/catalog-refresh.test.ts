import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Queue } from 'bullmq';
import { CATALOG_QUEUE, startCatalogRefresh } from '../../src/catalog/catalog-refresh.js';
import type { CatalogSyncSummary } from '../../src/catalog/catalog-sync.js';
import { budgetedClient } from '../helpers/budgeted-client.js';
import { startSimulator } from '../helpers/simulator.js';
import { tempStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope } from '../helpers/worker.js';

test('the worker’s scheduled refresh syncs the catalog at once and again every CATALOG_REFRESH_S, so a price changed upstream becomes an event without a command; 0 removes the schedule', async (t) => {
  const scope = cleanupScope(t);
  const sim = await startSimulator(scope);
  const { client, budget, redisUrl, connection } = await budgetedClient(scope, sim);
  const { store } = await tempStore(scope, { now: Date.now });

  const refreshes: CatalogSyncSummary[] = [];
  const refresh = await startCatalogRefresh({
    store,
    client,
    everyMs: 400,
    redisUrl,
    onRefresh: (summary) => refreshes.push(summary),
  });
  scope.after(() => refresh.close());

  await waitFor(() => refreshes.length >= 1, { message: 'the first refresh, at start' });
  assert.equal((await store.catalog.find({ code: 'MLBB-86' }))?.price, 19_500);
  assert.equal(
    (await sim.control('/products/MLBB-86', { method: 'PATCH', json: { price: 20_000, role_prices: {} } }))
      .status,
    200,
  );

  await waitFor(async () => (await store.catalog.find({ code: 'MLBB-86' }))?.price === 20_000, {
    message: 'a later scheduled refresh reads the new price',
  });
  const seen = refreshes.length;
  await waitFor(() => refreshes.length >= seen + 2, { message: 'two more refreshes at the new price' });
  const changes = (await store.feed.after(0, 1000)).filter((e) => e.type === 'product.price_changed');
  assert.equal(changes.length, 1, 'one event for one change, however many refreshes ran');
  assert.deepEqual(await budget.used().then((u) => u.create), 0, 'never from creation’s share');

  await refresh.close();
  const off = await startCatalogRefresh({ store, client, everyMs: 0, redisUrl });
  await off.close();
  const queue = new Queue(CATALOG_QUEUE, { connection });
  try {
    assert.deepEqual(await queue.getJobSchedulers(), [], 'CATALOG_REFRESH_S=0 removed the schedule');
  } finally {
    await queue.close();
  }
});
