import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { privateRedis } from '../helpers/redis.js';
import { startSimulator } from '../helpers/simulator.js';
import { openTestStore, otherConnection, scheduleSettings, tempDbPath } from '../helpers/store.js';

test('catalog sync fills the local catalog and the balance, and reports a price changed upstream', async (t) => {
  const sim = await startSimulator(t);
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  const env = {
    H2H_BASE_URL: sim.sim.baseUrl,
    H2H_API_KEY: sim.member.api_key,
    REDIS_URL: redis.url,
    H2H_DB_PATH: dbPath,
  };

  // Before any sync, status says how the catalog gets filled.
  (await otherConnection(dbPath)).close();
  const never = await runCli(['status'], env);
  assert.match(never.stdout, /Catalog: never synced .*h2h-sync catalog sync/);

  const first = await runCli(['catalog', 'sync', '--json'], env);
  assert.equal(first.code, 0, first.stderr);
  const summary = JSON.parse(first.stdout);
  assert.equal(summary.products, sim.fixture.products.length);
  assert.deepEqual(summary.price_changes, []);
  assert.equal(summary.balance.balance, sim.member.balance);

  await sim.control('/products/FF-70', { method: 'PATCH', json: { role_prices: { reseller: 9900 } } });
  const second = await runCli(['catalog', 'sync'], env);
  assert.equal(second.code, 0, second.stderr);
  assert.match(second.stdout, /│ Price changes │/);
  assert.match(second.stdout, /│ FF-70 +│ 9,600 +│ 9,900 +│/);

  const status = await runCli(['status', '--json'], env);
  const { catalog } = JSON.parse(status.stdout);
  assert.equal(catalog.products, sim.fixture.products.length);
  assert.ok(catalog.age_s >= 0 && catalog.age_s < 600, `synced ${catalog.age_s} s ago`);
  assert.equal(catalog.balance.balance, sim.member.balance);
  assert.match(
    (await runCli(['status'], env)).stdout,
    new RegExp(`Catalog: ${sim.fixture.products.length} products, synced`),
  );

  const store = await openTestStore(dbPath, scheduleSettings());
  t.after(() => store.close());
  assert.equal((await store.catalog.find({ code: 'FF-70' }))?.price, 9900);
  assert.deepEqual(
    (await store.feed.after(0)).map((e) => e.type),
    ['product.price_changed'],
  );
});
