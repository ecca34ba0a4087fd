// The catalog and the balance of several upstreams, on two simulated upstreams (the demo fixture as
// `default`, fixtures/beta.json, which is cheaper, as `beta`), each synced by its own client.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { type TestContext, test } from 'node:test';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { buildApiApp } from '../../src/api/app.js';
import { catalogRefreshNames, startCatalogRefresh } from '../../src/catalog/catalog-refresh.js';
import type { CatalogSyncSummary } from '../../src/catalog/catalog-sync.js';
import { syncCatalog } from '../../src/catalog/catalog-sync.js';
import type { ProductLink } from '../../src/catalog/product-map.js';
import { RateBudget } from '../../src/rate-budget/rate-budget.js';
import { startSimulatedUpstreams } from '../../src/simulator/simulated-upstreams.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { defaultApiLimits } from '../helpers/api.js';
import { privateRedis } from '../helpers/redis.js';
import { type DemoFixture, httpRequest } from '../helpers/simulator.js';
import { tempStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope } from '../helpers/worker.js';

const fixture = (file: string) =>
  JSON.parse(readFileSync(new URL(`../../fixtures/${file}`, import.meta.url), 'utf8')) as DemoFixture;

/** The shop's VAL-475 is `VALO-475` on beta. */
const LINKS: ProductLink[] = [{ code: 'VAL-475', upstreams: { beta: 'VALO-475' } }];

/**
 * `default` (the demo fixture: FF-70 inactive, GI-330 inactive) and `beta` (fixtures/beta.json:
 * VAL-475 sold as VALO-475, FF-355 as FF-355X, which only beta sells, GI-330 inactive), with
 * a client each on its own budget in a private Redis; all closed when the test ends.
 */
async function twoUpstreams(t: ReturnType<typeof cleanupScope>) {
  const demo = fixture('demo.json');
  const beta = fixture('beta.json');
  const product = (f: DemoFixture, code: string) => f.products.find((p) => p.code === code)!;
  product(demo, 'FF-70').is_active = false;
  product(demo, 'GI-330').is_active = false;
  product(beta, 'GI-330').is_active = false;
  product(beta, 'VAL-475').code = 'VALO-475';
  product(beta, 'FF-355').code = 'FF-355X';
  const sims = await startSimulatedUpstreams([
    { name: 'default', fixture: demo as never, rateLimit: 0 },
    { name: 'beta', fixture: beta as never, rateLimit: 0 },
  ]);
  t.after(() => sims.close());
  const redis = await privateRedis(t);
  const connection = new Redis(redis.url);
  t.after(() => connection.quit());
  const client = (name: string, f: DemoFixture) => {
    const apiKey = f.members[0]!.api_key;
    const made = new UpstreamClient({
      baseUrl: sims.get(name).baseUrl,
      apiKey,
      budget: new RateBudget({ redis: connection, apiKey }),
    });
    t.after(() => made.close());
    return made;
  };
  return {
    sims,
    clients: { default: client('default', demo), beta: client('beta', beta) },
    balances: { default: demo.members[0]!.balance, beta: beta.members[0]!.balance },
    redisUrl: redis.url,
    connection,
  };
}

/** GET `path` of the shop API over `store` on 127.0.0.1 with a reading token; closed when the test ends. */
async function shopApi(t: Pick<TestContext, 'after'>, store: OrderStore) {
  const api = await buildApiApp({ store, ...defaultApiLimits() });
  await api.listen({ host: '127.0.0.1', port: 0 });
  t.after(() => api.close());
  const origin = `http://127.0.0.1:${(api.server.address() as { port: number }).port}`;
  const { token } = await store.tokens.create('shop', ['orders:read', 'orders:write']);
  return async (path: string, body?: unknown) => {
    const answer = await request(`${origin}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    // biome-ignore lint/suspicious/noExplicitAny: answers of many shapes
    return { status: answer.statusCode, body: (await answer.body.json()) as any };
  };
}

const offers = (candidates: { upstream: string; productCode: string; price: number; isActive: boolean }[]) =>
  candidates.map((c) => [c.upstream, c.productCode, c.price, c.isActive]);

test("after each upstream's refresh a product's candidates are every synced upstream's, at their prices; GET /v1/products shows each shop product once with its candidates, GET /v1/balance each upstream's balance, and POST /v1/orders takes a product any upstream sells", async (t) => {
  const scope = cleanupScope(t);
  const { sims, clients, balances } = await twoUpstreams(scope);
  const { store } = await tempStore(scope, { now: Date.now, productLinks: LINKS });
  const call = await shopApi(scope, store);

  await syncCatalog({ store, upstream: 'default', client: clients.default });
  assert.deepEqual(offers(await store.catalog.candidates({ code: 'MLBB-86' })), [
    ['default', 'MLBB-86', 19_500, true],
  ]);
  const betaSync = await syncCatalog({ store, upstream: 'beta', client: clients.beta });
  assert.equal(betaSync.upstream, 'beta');
  assert.equal(betaSync.balance.balance, balances.beta, "the sync's balance is beta's");
  assert.deepEqual(offers(await store.catalog.candidates({ code: 'MLBB-86' })), [
    ['beta', 'MLBB-86', 18_500, true],
    ['default', 'MLBB-86', 19_500, true],
  ]);
  const val = await store.catalog.candidates({ code: 'VAL-475' });
  assert.deepEqual(
    val.map((c) => [c.upstream, c.productCode]),
    [
      ['beta', 'VALO-475'],
      ['default', 'VAL-475'],
    ],
    'the product map links the codes that differ',
  );

  // beta's price changes; its next refresh shows it, the default's stays.
  const patched = await httpRequest(`${sims.get('beta').origin}/__sim/products/MLBB-86`, {
    method: 'PATCH',
    json: { price: 21_000, role_prices: {} },
  });
  assert.equal(patched.status, 200);
  const again = await syncCatalog({ store, upstream: 'beta', client: clients.beta });
  assert.deepEqual(
    again.price_changes.map((p) => [p.upstream, p.code, p.previous_price, p.price]),
    [['beta', 'MLBB-86', 18_500, 21_000]],
  );
  assert.deepEqual(offers(await store.catalog.candidates({ code: 'MLBB-86' })), [
    ['default', 'MLBB-86', 19_500, true],
    ['beta', 'MLBB-86', 21_000, true],
  ]);

  const products = (await call('/v1/products')).body.data as {
    code: string;
    price: number;
    is_active: boolean;
    candidates: { upstream: string; price: number }[];
  }[];
  const shown = (code: string) => products.find((p) => p.code === code);
  /** beta's price of the shop product `code`. */
  const beta = (code: string) => shown(code)?.candidates.find((c) => c.upstream === 'beta')?.price;
  assert.deepEqual(shown('MLBB-86'), {
    ...(await store.catalog.shopProduct({ code: 'MLBB-86' })),
    price: 19_500,
    candidates: [
      { upstream: 'default', product_code: 'MLBB-86', price: 19_500, available: true },
      { upstream: 'beta', product_code: 'MLBB-86', price: 21_000, available: true },
    ],
  });
  assert.deepEqual(
    [shown('FF-70')?.price, shown('FF-70')?.is_active, shown('FF-70')?.candidates.length],
    [beta('FF-70'), true, 2],
    "inactive on the default upstream, active on beta: beta's price",
  );
  assert.equal(shown('GI-330')?.is_active, false, 'inactive on both');
  assert.deepEqual(shown('FF-355X')?.candidates, [
    { upstream: 'beta', product_code: 'FF-355X', price: beta('FF-355X'), available: true },
  ]);
  assert.equal(shown('VALO-475'), undefined, "beta's own code of VAL-475 is no product of the shop's");
  assert.equal(products.length, new Set(products.map((p) => p.code)).size, 'each shop product once');

  const balance = (await call('/v1/balance')).body;
  assert.deepEqual(
    balance.upstreams.map((u: { upstream: string; balance: number }) => [u.upstream, u.balance]),
    [
      ['default', balances.default],
      ['beta', balances.beta],
    ],
  );
  assert.equal(balance.balance, balances.default + balances.beta);

  const order = (ref: string, code: string) =>
    call('/v1/orders', {
      partner_ref: ref,
      product_code: code,
      data: { user_id: '12345678', server_id: '2001' },
    });
  assert.equal((await order('only-beta', 'FF-355X')).status, 202, 'known on beta only');
  assert.equal((await order('active-on-beta', 'FF-70')).status, 202, 'active on beta only');
  const inactive = await order('inactive', 'GI-330');
  assert.deepEqual([inactive.status, inactive.body.error.code], [422, 'PRODUCT_INACTIVE']);
  const unknown = await order('unknown', 'VALO-475');
  assert.deepEqual([unknown.status, unknown.body.error.code], [422, 'UNKNOWN_PRODUCT']);
});

test("each upstream's scheduled refresh has its own queue and scheduler: beta's syncs beta's catalog only, the default's names are unchanged", async (t) => {
  const scope = cleanupScope(t);
  const { clients, redisUrl, connection } = await twoUpstreams(scope);
  const { store } = await tempStore(scope, { now: Date.now });

  const refreshes: CatalogSyncSummary[] = [];
  const refresh = await startCatalogRefresh({
    store,
    upstream: 'beta',
    client: clients.beta,
    everyMs: 60_000,
    redisUrl,
    onRefresh: (summary) => refreshes.push(summary),
  });
  scope.after(() => refresh.close());
  await waitFor(() => refreshes.length >= 1, { message: "beta's first refresh, at start" });

  assert.deepEqual(catalogRefreshNames(), { queue: 'h2h-catalog', schedulerId: 'h2h-catalog-every' });
  const names = catalogRefreshNames('beta');
  assert.deepEqual(names, { queue: 'h2h-catalog@beta', schedulerId: 'h2h-catalog-every@beta' });
  assert.equal(refreshes[0]!.upstream, 'beta');
  assert.notEqual(await store.catalog.syncedAt('beta'), null);
  assert.equal(await store.catalog.syncedAt('default'), null, "the default upstream's catalog is not beta's");
  assert.deepEqual(
    (await store.catalog.candidates({ code: 'MLBB-86' })).map((c) => c.upstream),
    ['beta'],
  );
  const queues = [new Queue(names.queue, { connection }), new Queue('h2h-catalog', { connection })];
  try {
    assert.deepEqual(
      (await queues[0]!.getJobSchedulers()).map((s) => s.key),
      [names.schedulerId],
    );
    assert.deepEqual(await queues[1]!.getJobSchedulers(), [], "nothing on the default upstream's queue");
  } finally {
    await Promise.all(queues.map((q) => q.close()));
  }
});
