import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { type TestContext, test } from 'node:test';
import { request } from 'undici';
import { buildApiApp } from '../../src/api/app.js';
import { syncCatalog } from '../../src/catalog/catalog-sync.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import type { FeedEvent } from '../../src/store/feed.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { defaultApiLimits } from '../helpers/api.js';
import { budgetedClient } from '../helpers/budgeted-client.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import { startTestNotifier, verifyNotification } from '../helpers/notify.js';
import { startSimulator } from '../helpers/simulator.js';
import { snapshot, tempStore } from '../helpers/store.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import { cleanupScope } from '../helpers/worker.js';

const priceChanges = (events: FeedEvent[]) => events.filter((e) => e.type === 'product.price_changed');

/**
 * The shop API on 127.0.0.1 over `store`, closed when the test ends; `call(path, body?)` sends a
 * GET, or a POST of `body` as JSON, with a token of both scopes.
 */
async function startShopApi(t: Pick<TestContext, 'after'>, store: OrderStore) {
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

/**
 * An upstream on 127.0.0.1 that answers GET /categories, /products and /profile with exactly the
 * records given (no field added), and a client of it; both closed when the test ends.
 */
async function literalUpstream(
  t: Pick<TestContext, 'after'>,
  answers: { categories: unknown[]; products: unknown[] },
): Promise<UpstreamClient> {
  const bodies: Record<string, unknown> = {
    '/v1/member-api/categories': answers.categories,
    '/v1/member-api/products': answers.products,
    '/v1/member-api/profile': {
      member_id: 'M-1',
      member_name: 'Shop',
      member_role: 'reseller',
      member_balance: 1_000_000,
    },
  };
  const server = createServer((req, res) => {
    const body = bodies[req.url ?? ''];
    res.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body ?? { statusCode: 404, message: 'ROUTE_NOT_FOUND', error: req.url }));
  });
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  t.after(() => new Promise<void>((closed) => server.close(() => closed())));
  const { port } = server.address() as { port: number };
  const client = new UpstreamClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'key' });
  t.after(() => client.close());
  return client;
}

test('a sync writes the catalog and the profile balance from three poll-priority calls; a price changed upstream is exactly one product.price_changed event, notified signed to an endpoint of product.*', async (t) => {
  const scope = cleanupScope(t);
  const sim = await startSimulator(scope);
  const { client, budget } = await budgetedClient(scope, sim);
  const { store } = await tempStore(scope, { now: Date.now });
  assert.equal(await store.catalog.syncedAt(), null);

  const first = await syncCatalog({ store, client });
  assert.deepEqual(await budget.used().then((u) => [u.poll, u.create]), [3, 0], 'poll share only');
  assert.equal(first.products, sim.fixture.products.length);
  assert.equal(first.categories, sim.fixture.categories.length);
  assert.deepEqual(first.price_changes, []);
  assert.equal(first.balance.balance, sim.member.balance);
  assert.equal(first.balance.profile_balance, sim.member.balance);
  const mlbb = (await store.catalog.find({ code: 'MLBB-86' }))!;
  assert.equal(mlbb.price, 19_500, "the reseller's price");
  assert.deepEqual(mlbb.target, { user_id: '^[0-9]{6,12}$', server_id: '^[0-9]{4,5}$' });
  assert.equal((await store.catalog.find({ code: 'MLBB-2195' }))?.is_active, false);
  assert.equal(
    (await store.catalog.find({ id: mlbb.id.toUpperCase() }))?.code,
    'MLBB-86',
    'ids without case',
  );
  assert.deepEqual(await store.feed.after(0), [], 'a first sync changes no price');

  const sink = await startWebhookSink(scope, { secrets: [] });
  const secret = generateEndpointSecret();
  await store.endpoints.add({ url: sink.url, events: ['product.*'], secret });
  await startTestNotifier(scope, { store });

  const patched = await sim.control('/products/MLBB-86', {
    method: 'PATCH',
    json: { price: 21_000, role_prices: {} },
  });
  assert.equal(patched.status, 200);
  const second = await syncCatalog({ store, client });
  const third = await syncCatalog({ store, client });
  assert.equal(third.price_changes.length, 0, 'the same price again is no change');
  assert.deepEqual(
    second.price_changes.map((p) => [p.code, p.previous_price, p.price]),
    [['MLBB-86', 19_500, 21_000]],
  );
  const events = priceChanges(await store.feed.after(0, 1000));
  assert.equal(events.length, 1);
  assert.deepEqual(events[0]!.data, { ...mlbb, price: 21_000, upstream: 'default', previous_price: 19_500 });

  const [delivery] = await sink.waitForDeliveries((d) => d.answer === 200, 1);
  const body = verifyNotification(secret, delivery!);
  assert.equal(body.type, 'product.price_changed');
  assert.deepEqual(body.data, events[0]!.data);
});

/** A catalog of one product, as a sync would read it (now), with the profile balance `balance`. */
const syncOf = (balance: number, price = 15_000) => catalogSnapshot({ balance, price });

test('the balance: debited when the upstream accepts an order, credited on FAILED and REFUNDED, reset by a profile read; balance.low once per crossing', async (t) => {
  const { store } = await tempStore(t, { balanceLowThreshold: 50_000 });
  const accept = async (ref: string, status = 'PENDING') =>
    await store.writer.applyOrderSnapshot(snapshot(ref, status), { source: 'poll' });
  await accept('BEFORE');
  assert.equal((await store.balance.view()).balance, null, 'nothing before the first profile read');

  await store.catalog.applySync(syncOf(100_000));
  assert.equal((await store.balance.view()).balance, 100_000);
  await accept('O1');
  await accept('O1', 'PROCESSING');
  assert.deepEqual(
    [(await store.balance.view()).balance, (await store.balance.view()).debited],
    [85_000, 15_000],
    'one debit per order',
  );
  for (const ref of ['O2', 'O3', 'O4', 'O5']) await accept(ref);
  assert.equal((await store.balance.view()).balance, 25_000);
  await accept('O1', 'FAILED');
  await accept('O2', 'SUCCESS');
  await accept('O2', 'REFUNDED');
  await accept('O2', 'REFUNDED');
  assert.deepEqual(
    [(await store.balance.view()).balance, (await store.balance.view()).credited],
    [55_000, 30_000],
  );
  await accept('O6');
  const lows = (await store.feed.after(0, 1000)).filter((e) => e.type === 'balance.low');
  assert.deepEqual(
    lows.map((e) => e.data),
    [
      { ...(await store.balance.viewOf('default')), balance: 40_000, debited: 60_000, credited: 0 },
      { ...(await store.balance.viewOf('default')), balance: 40_000 },
    ],
    'once when it fell under 50,000, again only after it was back over',
  );

  const queued = await store.writer.createLocalOrder({
    partnerRef: 'UNPRICED',
    productCode: 'ZZ',
    data: { user_id: '1' },
  });
  assert.equal(queued.order.submissionState, 'pending');
  await store.writer.markRejected('UNPRICED', 'INVALID_PRODUCT', 'no such product');
  assert.equal((await store.balance.view()).debited, 90_000, 'a rejected order costs nothing');

  await store.catalog.applySync(syncOf(500_000));
  assert.deepEqual(
    [
      (await store.balance.view()).balance,
      (await store.balance.view()).debited,
      (await store.balance.view()).credited,
    ],
    [500_000, 0, 0],
    'a profile read starts the accounting again',
  );
});

test('GET /v1/categories, /v1/products and /v1/balance answer from the local catalog, an unknown category_code 400 naming the known ones once it is synced; POST /v1/orders refuses an unknown or inactive product and mistargeted data before storing anything', async (t) => {
  const scope = cleanupScope(t);
  const sim = await startSimulator(scope);
  const { client } = await budgetedClient(scope, sim);
  const { store } = await tempStore(scope, { now: Date.now });
  const call = await startShopApi(scope, store);

  const never = await call('/v1/products');
  assert.deepEqual(never.body, { data: [], synced_at: null });
  const neverGi = await call('/v1/products?category_code=GI');
  assert.deepEqual(neverGi.body, { data: [], synced_at: null }, 'a catalog never synced checks nothing');
  const early = await call('/v1/orders', { product_code: 'NOPE', data: { user_id: '1' } });
  assert.equal(early.status, 202, 'a catalog never synced checks nothing');

  const synced = await syncCatalog({ store, client });
  const products = await call('/v1/products');
  assert.equal(products.status, 200);
  assert.equal(products.body.synced_at, synced.synced_at);
  assert.deepEqual(products.body.data, await store.catalog.products());
  const gi = await call('/v1/products?category_code=GI');
  assert.deepEqual(
    gi.body.data.map((p: { code: string }) => p.code),
    ['GI-60', 'GI-330'],
  );
  const typo = await call('/v1/products?category_code=G1');
  assert.equal(typo.status, 400);
  assert.equal(typo.body.error.code, 'VALIDATION_ERROR');
  assert.match(
    typo.body.error.message,
    /^category_code G1 .* one of FF, GI, MLBB, PUBGM, VAL \(GET \/v1\/categories\)$/,
  );
  const categories = await call('/v1/categories');
  assert.deepEqual(
    categories.body.data.map((c: { code: string }) => c.code),
    ['FF', 'GI', 'MLBB', 'PUBGM', 'VAL'],
  );
  const balance = await call('/v1/balance');
  assert.deepEqual(balance.body, await store.balance.view());
  assert.equal(balance.body.balance, sim.member.balance);

  const ordersBefore = (await store.queries.pageOrders({ limit: 100 })).length;
  const mlbbId = (await store.catalog.find({ code: 'MLBB-86' }))!.id;
  for (const [body, code, message] of [
    [{ product_code: 'NOPE', data: { user_id: '12345678' } }, 'UNKNOWN_PRODUCT', /GET \/v1\/products/],
    [
      { product_id: '00000000-0000-4000-8000-000000000000', data: { user_id: '1' } },
      'UNKNOWN_PRODUCT',
      /product_id/,
    ],
    [
      { product_code: 'MLBB-172', product_id: mlbbId, data: { user_id: '12345678', server_id: '2001' } },
      'UNKNOWN_PRODUCT',
      /different products/,
    ],
    [
      { product_code: 'MLBB-2195', data: { user_id: '12345678', server_id: '2001' } },
      'PRODUCT_INACTIVE',
      /not active/,
    ],
    [
      { product_code: 'MLBB-86', data: { user_id: '12345678' } },
      'INVALID_TARGET',
      /data\.server_id: is required/,
    ],
    [
      { product_id: mlbbId, data: { user_id: '12ab', server_id: '2001' } },
      'INVALID_TARGET',
      /data\.user_id: does not match \^\[0-9\]\{6,12\}\$/,
    ],
  ] as const) {
    const refused = await call('/v1/orders', body);
    assert.equal(refused.status, 422, JSON.stringify(body));
    assert.equal(refused.body.error.code, code);
    assert.match(refused.body.error.message, message);
  }
  assert.equal(
    (await store.queries.pageOrders({ limit: 100 })).length,
    ordersBefore,
    'nothing stored, so nothing sent',
  );
  assert.equal(await store.queries.countQueued(), 1, 'only the order of the unsynced catalog waits');
  const good = await call('/v1/orders', {
    product_id: mlbbId,
    data: { user_id: '12345678', server_id: '2001' },
  });
  assert.equal(good.status, 202);
});

test('a product or category listed without is_active is active: after a sync the shop API accepts an order for it, and only an explicit false is PRODUCT_INACTIVE', async (t) => {
  const { store } = await tempStore(t, { now: Date.now });
  const call = await startShopApi(t, store);
  const client = await literalUpstream(t, {
    categories: [
      { name: 'Mobile Legends', code: 'MLBB', sub_name: 'Moonton', logo: 'mlbb.png' },
      { name: 'Valorant', code: 'VAL', sub_name: 'Riot', logo: 'val.png', is_active: false },
    ],
    products: [
      {
        id: '11111111-1111-4111-8111-111111111111',
        code: 'MLBB-86',
        name: 'ML 86',
        category_code: 'MLBB',
        price: 19_500,
      },
      {
        id: '22222222-2222-4222-8222-222222222222',
        code: 'MLBB-2195',
        name: 'ML 2195',
        category_code: 'MLBB',
        price: 466_000,
        is_active: false,
      },
    ],
  });

  await syncCatalog({ store, client });

  const products = await call('/v1/products');
  assert.deepEqual(
    products.body.data.map((p: { code: string; is_active: boolean }) => [p.code, p.is_active]),
    [
      ['MLBB-86', true],
      ['MLBB-2195', false],
    ],
  );
  const categories = await call('/v1/categories');
  assert.deepEqual(
    categories.body.data.map((c: { code: string; is_active: boolean }) => [c.code, c.is_active]),
    [
      ['MLBB', true],
      ['VAL', false],
    ],
  );
  const accepted = await call('/v1/orders', { product_code: 'MLBB-86', data: { user_id: '12345678' } });
  assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
  assert.equal(accepted.body.submission, 'queued');
  const refused = await call('/v1/orders', { product_code: 'MLBB-2195', data: { user_id: '12345678' } });
  assert.equal(refused.status, 422);
  assert.equal(refused.body.error.code, 'PRODUCT_INACTIVE');
});

test('a product the simulator does not enable for the API is listed inactive, and the shop API refuses it with 422 PRODUCT_INACTIVE before anything is stored or sent', async (t) => {
  const scope = cleanupScope(t);
  const sim = await startSimulator(scope);
  const client = new UpstreamClient({ baseUrl: sim.sim.baseUrl, apiKey: sim.member.api_key });
  scope.after(() => client.close());
  const { store } = await tempStore(scope, { now: Date.now });
  const call = await startShopApi(scope, store);
  const listed = (await sim.api('/products')).body.find((p: { code: string }) => p.code === 'PUBGM-325');
  assert.equal(listed.is_active, false, 'PUBGM-325 is active, in an active category, not API-enabled');

  await syncCatalog({ store, client });
  const refused = await call('/v1/orders', {
    product_code: 'PUBGM-325',
    data: { user_id: '12345678' },
    partner_ref: 'api-disabled-1',
  });

  assert.equal(refused.status, 422);
  assert.equal(refused.body.error.code, 'PRODUCT_INACTIVE');
  assert.match(refused.body.error.message, /PUBGM-325 .* is not active now/);
  assert.equal(await store.queries.getPublicOrder('api-disabled-1'), undefined, 'nothing stored');
  assert.equal((await sim.api('/orders/api-disabled-1')).status, 404, 'nothing sent');
});
