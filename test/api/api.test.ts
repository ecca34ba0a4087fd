import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { type TestContext, test } from 'node:test';
import fc from 'fast-check';
import { request } from 'undici';
import { buildApiApp } from '../../src/api/app.js';
import { publicOrderSchema } from '../../src/api/schemas.js';
import { startSubmissionPump } from '../../src/orders/submission-pump.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { defaultApiLimits, sendApi } from '../helpers/api.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import { startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { snapshot, tempStore } from '../helpers/store.js';
import { describeEachBackend, type StoreBackend } from '../helpers/store-backends.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope } from '../helpers/worker.js';

/**
 * The API on a real port of 127.0.0.1 over a real store (a SQLite file unless `backend` says
 * otherwise), with an early-poll queue that takes every request; `call` sends a request with a token.
 */
async function startApi(t: Pick<TestContext, 'after'>, backend?: StoreBackend) {
  const { store } = backend
    ? await backend.tempStore(t, { now: Date.now })
    : await tempStore(t, { now: Date.now });
  const app = await buildApiApp({ store, ...defaultApiLimits(), requestPoll: async () => {} });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.after(() => app.close());
  const { port } = app.server.address() as { port: number };
  const origin = `http://127.0.0.1:${port}`;
  const reader = (await store.tokens.create('shop reader', ['orders:read'])).token;
  const call = async (path: string, token: string | null = reader, method: 'GET' | 'POST' = 'GET') => {
    const answer = await request(`${origin}${path}`, {
      method,
      headers: token === null ? {} : { authorization: `Bearer ${token}` },
    });
    // biome-ignore lint/suspicious/noExplicitAny: the answers have many shapes; each test reads its own
    const body = (await answer.body.json()) as any;
    return { status: answer.statusCode, headers: answer.headers, body };
  };
  return { store, app, origin, reader, call };
}

/** Orders O1…On, each placed and answered by the upstream, one ms apart. */
async function placeOrders(store: OrderStore, n: number, from = 1) {
  for (let i = from; i < from + n; i++) {
    await store.writer.createLocalOrder({
      partnerRef: `O${i}`,
      productCode: 'ML86',
      data: { user_id: String(i) },
    });
    await store.writer.applyOrderSnapshot(
      snapshot(`O${i}`, i % 2 === 0 ? 'SUCCESS' : 'PENDING', { target: `${i}` }),
      { source: 'create' },
    );
  }
}

test('no token, a wrong one or a revoked one is 401 with the fix; a token without the scope is 403', async (t) => {
  const { store, call } = await startApi(t);
  const missing = await call('/v1/orders', null);
  assert.equal(missing.status, 401);
  assert.equal(missing.body.error.code, 'TOKEN_MISSING');
  assert.match(missing.body.error.message, /h2h-sync tokens create/);
  assert.equal(missing.headers['www-authenticate'], 'Bearer realm="h2h-sync"');

  const wrong = await call('/v1/orders', `h2h_AAAAAAAAAAAA_${'x'.repeat(43)}`);
  assert.equal(wrong.body.error.code, 'TOKEN_INVALID');
  assert.equal((await call('/v1/orders', 'not-a-token')).body.error.code, 'TOKEN_INVALID');

  const { token, info } = await store.tokens.create('till', ['orders:write']);
  const forbidden = await call('/v1/orders', token);
  assert.equal(forbidden.status, 403);
  assert.equal(forbidden.body.error.code, 'SCOPE_MISSING');
  assert.match(forbidden.body.error.message, /--scope orders:read/);

  const reader = await store.tokens.create('revoked soon', ['orders:read']);
  assert.equal((await call('/v1/orders', reader.token)).status, 200);
  assert.ok(await store.tokens.revoke(reader.info.id));
  const revoked = await call('/v1/orders', reader.token);
  assert.equal(revoked.status, 401);
  assert.equal(revoked.body.error.code, 'TOKEN_REVOKED');
  assert.notEqual(
    (await store.tokens.list()).find((x) => x.id === info.id)?.lastUsedAt,
    null,
    'last use recorded',
  );
});

test('a token is stored only as a hash and shown once', async (t) => {
  const { store, db } = await tempStore(t);
  const { token, info } = await store.tokens.create('web shop', ['orders:read', 'orders:write']);
  const secret = token.slice('h2h_'.length + 12 + 1); // h2h_<12-char id>_<secret>
  const stored = JSON.stringify(db.prepare('SELECT * FROM api_tokens').all());
  assert.ok(!stored.includes(secret), 'the secret is not in the store');
  assert.deepEqual(Object.keys((await store.tokens.list())[0]!).sort(), Object.keys(info).sort());
  assert.equal((await store.tokens.authenticate(token)).ok, true);
  assert.equal(
    (await store.tokens.authenticate(`${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`)).ok,
    false,
  );
  await assert.rejects(
    () => store.tokens.create('x', ['orders:delete' as 'orders:read']),
    /scopes must be one or more of/,
  );
});

test('GET /v1/orders/:ref answers the public representation, by partner_ref or invoice number', async (t) => {
  const { store, call } = await startApi(t);
  await placeOrders(store, 2);
  const one = await call('/v1/orders/O2');
  assert.equal(one.status, 200);
  assert.equal(one.body.status, 'SUCCESS');
  assert.equal(one.body.version, 1);
  assert.deepEqual(one.body, await store.queries.getPublicOrder('O2'));
  assert.deepEqual((await call('/v1/orders/INV-O2')).body, one.body);
  const missing = await call('/v1/orders/NOPE');
  assert.equal(missing.status, 404);
  assert.equal(missing.body.error.code, 'ORDER_NOT_FOUND');
});

test('GET /v1/orders pages newest first with a stable cursor, and filters by status and creation time', async (t) => {
  const { store, call } = await startApi(t);
  await placeOrders(store, 7);
  const seen: string[] = [];
  let cursor: string | null = '';
  let pages = 0;
  while (cursor !== null) {
    const page = await call(`/v1/orders?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
    assert.equal(page.status, 200);
    seen.push(...page.body.data.map((o: { partner_ref: string }) => o.partner_ref));
    cursor = page.body.next_cursor;
    if (pages++ === 0) await placeOrders(store, 1, 100); // a new order never shifts the pages after it
  }
  assert.deepEqual(seen, ['O7', 'O6', 'O5', 'O4', 'O3', 'O2', 'O1']);

  const success = await call('/v1/orders?status=SUCCESS&limit=100');
  assert.deepEqual(
    success.body.data.map((o: { partner_ref: string }) => o.partner_ref),
    ['O100', 'O6', 'O4', 'O2'],
  );
  const future = await call(`/v1/orders?created_from=${new Date(Date.now() + 60_000).toISOString()}`);
  assert.deepEqual(future.body, { data: [], next_cursor: null });
  const past = await call(`/v1/orders?created_to=${new Date(Date.now() + 60_000).toISOString()}&limit=100`);
  assert.equal(past.body.data.length, 8);

  for (const [query, code] of [
    ['cursor=bm9wZQ', 'INVALID_CURSOR'],
    [`cursor=${Buffer.from('o:9007199254740992').toString('base64url')}`, 'INVALID_CURSOR'],
    ['limit=0', 'VALIDATION_ERROR'],
    ['limit=101', 'VALIDATION_ERROR'],
    ['created_from=yesterday', 'VALIDATION_ERROR'],
    ['colour=red', 'VALIDATION_ERROR'],
  ]) {
    const refused = await call(`/v1/orders?${query}`);
    assert.equal(refused.status, 400, query);
    assert.equal(refused.body.error.code, code, query);
  }
});

test('GET /v1/orders refuses created_from or created_to without an offset, or a date alone, with 400 saying to add Z or an offset', async (t) => {
  const { store, call } = await startApi(t);
  await placeOrders(store, 2);

  for (const [name, value, problem] of [
    ['created_from', '2026-11-25T00:00:00', /^created_from has no offset: add Z or an offset/],
    ['created_to', '2026-11-25T00:00:00.000', /^created_to has no offset: add Z or an offset/],
    ['created_from', '2026-11-25 07:00', /^created_from has no offset: add Z or an offset/],
    ['created_to', '2026-11-25', /^created_to is a date without a time: give a time and Z or an offset/],
    [
      'created_from',
      '2026-11-25T07:00:00 07:00',
      /^created_from must be .* with Z or an offset \(in a URL, write \+ as %2B\)/,
    ],
  ] as const) {
    const refused = await call(`/v1/orders?${name}=${encodeURIComponent(value)}`);
    assert.equal(refused.status, 400, value);
    assert.equal(refused.body.error.code, 'VALIDATION_ERROR', value);
    assert.match(refused.body.error.message, problem);
    assert.match(refused.body.error.message, /e\.g\. 2026-11-25T00:00:00Z/);
  }

  // An hour ago written in UTC+7: its wall clock is 6 hours ahead, so only the offset makes it the past.
  const anHourAgo = new Date(Date.now() - 3_600_000 + 7 * 3_600_000).toISOString().replace('Z', '+07:00');
  const since = await call(`/v1/orders?created_from=${encodeURIComponent(anHourAgo)}`);
  assert.equal(since.status, 200);
  assert.equal(since.body.data.length, 2);
});

test('GET /v1/events reads the change feed from any cursor: the pages together are the feed', async (t) => {
  const { store, call } = await startApi(t);
  await placeOrders(store, 4);
  await store.writer.applyOrderSnapshot(snapshot('O1', 'FAILED'), { source: 'webhook', eventId: 'e-1' });
  const read: unknown[] = [];
  let after = 0;
  for (;;) {
    const page = await call(`/v1/events?after=${after}&limit=2`);
    assert.equal(page.status, 200);
    read.push(...page.body.data);
    after = page.body.next_after;
    if (!page.body.has_more) break;
  }
  assert.deepEqual(read, await store.feed.after(0, 1000));
  assert.equal(read.length, 5);
  assert.deepEqual(
    (read as Array<{ type: string; previous_status: unknown; data: { partner_ref: string } }>)
      .filter((e) => e.data.partner_ref === 'O1')
      .map((e) => [e.type, e.previous_status]),
    [
      ['order.submitted', null],
      ['order.updated', 'PENDING'],
    ],
    'each order event says the status its order had before it',
  );
  const empty = await call(`/v1/events?after=${after}`);
  assert.deepEqual(empty.body, { data: [], next_after: after, has_more: false });
});

test('the order schema of the API names every field of the public representation', async (t) => {
  const { store } = await tempStore(t);
  await placeOrders(store, 1);
  assert.deepEqual(
    Object.keys(publicOrderSchema.properties).sort(),
    Object.keys((await store.queries.getPublicOrder('O1'))!).sort(),
  );
  assert.deepEqual([...publicOrderSchema.required].sort(), Object.keys(publicOrderSchema.properties).sort());
});

test('/openapi.json is the OpenAPI 3.1 document of the routes, and docs/openapi.json is current', async (t) => {
  const { call } = await startApi(t);
  const doc = await call('/openapi.json', null);
  assert.equal(doc.status, 200);
  assert.match(doc.body.openapi, /^3\.1\./);
  assert.deepEqual(Object.keys(doc.body.paths).sort(), [
    '/v1/balance',
    '/v1/categories',
    '/v1/events',
    '/v1/orders',
    '/v1/orders/{ref}',
    '/v1/orders/{ref}/cancel',
    '/v1/orders/{ref}/refresh',
    '/v1/products',
  ]);
  const { description, ...previousStatus } = doc.body.components.schemas.Event.properties.previous_status;
  assert.deepEqual(previousStatus, {
    type: ['string', 'null'],
    enum: ['PENDING', 'PROCESSING', 'SUCCESS', 'FAILED', 'REFUNDED', null],
  });
  assert.match(description, /status before this change/);
  assert.deepEqual(
    doc.body,
    JSON.parse(readFileSync('docs/openapi.json', 'utf8')),
    'docs/openapi.json is stale: run npm run docs:openapi',
  );
});

/** A character the API refuses in any text: C0 controls (NUL most often), DEL and C1 controls. */
const controlCharacter = fc.oneof(
  { weight: 2, arbitrary: fc.constant('\u0000') },
  { weight: 3, arbitrary: fc.constantFrom('\u0001', '\t', '\n', '\u001f', '\u007f', '\u0085', '\u009f') },
);
/** Short text of any Unicode, often with a control character: for paths and queries. */
const text = fc.string({
  unit: fc.oneof(
    { weight: 3, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }) },
    { weight: 1, arbitrary: controlCharacter },
  ),
  maxLength: 12,
});
/** The same, now and then with a lone surrogate too, which only a JSON body can carry. */
const jsonText = fc.oneof(
  { weight: 4, arbitrary: text },
  { weight: 1, arbitrary: fc.tuple(text, fc.constantFrom('\ud800', '\udfff')).map(([a, b]) => a + b) },
);
/** Values of a query parameter, cursors far beyond any seq (2^53, 2^63, 2^64 …) among them. */
const queryValue = fc.oneof(
  text,
  fc.integer().map(String),
  fc.bigInt({ min: 0n, max: 2n ** 80n }).map(String),
  fc.constantFrom('-1', '1e3', '', 'null', '9007199254740992', '9223372036854775808', '18446744073709551616'),
);

describeEachBackend('the API under random requests', (backend) => {
  test('random requests to every route get a 2xx or a 4xx with a code, never a 5xx', async (t) => {
    const { store, origin, reader } = await startApi(t, backend);
    await placeOrders(store, 3);
    const writer = (await store.tokens.create('till', ['orders:read', 'orders:write'])).token;
    const token = fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom(reader, writer) },
      { weight: 1, arbitrary: fc.constantFrom(null, 'Bearer', 'h2h_x_y') },
    );
    /** Any of `names`, some twice: an array of [name, value]. */
    const query = (names: string[]) =>
      fc.array(fc.tuple(fc.constantFrom(...names), queryValue), { maxLength: 4 });
    /** Each of `names` given or not, once. */
    const params = (names: string[]) =>
      fc
        .record(Object.fromEntries(names.map((name) => [name, queryValue])), { requiredKeys: [] })
        .map((given) => Object.entries(given) as [string, string][]);
    const ref = fc.oneof(fc.constantFrom('O1', 'INV-O2', 'NOPE'), text);
    const anyRoute = fc.record({
      method: fc.constantFrom('GET', 'POST', 'DELETE', 'PUT'),
      path: fc.constantFrom(
        '/v1/orders',
        '/v1/orders/O1',
        '/v1/orders/%E0%A4%A',
        '/v1/events',
        '/v1/products',
        '/v1/categories',
        '/v1/balance',
        '/v1/nope',
        '/openapi.json',
      ),
      query: query([
        'limit',
        'cursor',
        'after',
        'status',
        'created_from',
        'created_to',
        'category_code',
        'x',
      ]),
      token,
    });
    const oneOrder = fc.record({
      method: fc.constantFrom('GET', 'POST'),
      path: fc
        .tuple(ref, fc.constantFrom('', '/refresh', '/cancel'))
        .map(([r, tail]) => `/v1/orders/${encodeURIComponent(r)}${tail}`),
      query: fc.constant([]),
      token,
    });
    const list = fc.oneof(
      fc.record({
        method: fc.constant('GET'),
        path: fc.constant('/v1/orders'),
        query: params(['status', 'cursor', 'created_from', 'created_to', 'limit']),
        token,
      }),
      fc.record({
        method: fc.constant('GET'),
        path: fc.constant('/v1/products'),
        query: params(['category_code']),
        token,
      }),
    );
    const feed = fc.record({
      method: fc.constant('GET'),
      path: fc.constant('/v1/events'),
      query: params(['after', 'limit']),
      token,
    });
    const placeOrder = fc.record({
      method: fc.constant('POST'),
      path: fc.constant('/v1/orders'),
      query: fc.constant([]),
      token,
      body: fc.record(
        {
          product_code: fc.oneof(fc.constant('MLBB-86'), jsonText),
          product_id: jsonText,
          data: fc.dictionary(fc.oneof(fc.constant('user_id'), jsonText), jsonText, {
            minKeys: 1,
            maxKeys: 3,
          }),
          partner_ref: jsonText,
        },
        { requiredKeys: ['data'] },
      ),
    });
    await fc.assert(
      fc.asyncProperty(fc.oneof(anyRoute, oneOrder, list, feed, placeOrder), async (call) => {
        const search = new URLSearchParams(call.query).toString();
        const body = 'body' in call ? JSON.stringify(call.body) : undefined;
        const answer = await request(`${origin}${call.path}${search ? `?${search}` : ''}`, {
          method: call.method as 'GET',
          headers: {
            ...(call.token === null ? {} : { authorization: `Bearer ${call.token}` }),
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body,
        });
        const answered = (await answer.body.json()) as { error?: { code: string } };
        const asked = `${call.method} ${call.path}?${search} ${body ?? ''}`;
        assert.ok(answer.statusCode < 500, `${asked} → ${answer.statusCode}`);
        if (answer.statusCode >= 400) assert.equal(typeof answered.error?.code, 'string', asked);
      }),
      { numRuns: 300, seed: 5 },
    );
  });
});

test('POST /v1/orders queues an order at once; the same ref and body answer the same order, another body 409; a full backlog 503', async (t) => {
  const { store, origin } = await startApi(t);
  const writer = (await store.tokens.create('till', ['orders:write'])).token;
  const post = async (body: unknown, token = writer) => {
    const answer = await request(`${origin}/v1/orders`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    // biome-ignore lint/suspicious/noExplicitAny: answers of many shapes
    return { status: answer.statusCode, headers: answer.headers, body: (await answer.body.json()) as any };
  };
  const body = { product_code: 'MLBB-86', data: { user_id: '12345678', server_id: '2001' } };

  const generated = await post(body);
  assert.equal(generated.status, 202);
  assert.match(generated.body.partner_ref, /^h2h-/);
  assert.equal(generated.body.submission, 'queued');
  assert.equal(generated.body.version, 0);

  const first = await post({ ...body, partner_ref: 'shop-1' });
  assert.equal(first.status, 202);
  const again = await post({
    data: { server_id: '2001', user_id: '12345678' },
    partner_ref: 'shop-1',
    product_code: 'MLBB-86',
  });
  assert.equal(again.status, 200);
  assert.equal(again.headers['idempotent-replayed'], 'true');
  assert.deepEqual(again.body, first.body);
  const conflict = await post({
    ...body,
    partner_ref: 'shop-1',
    data: { user_id: '87654321', server_id: '2001' },
  });
  assert.equal(conflict.status, 409);
  assert.equal(conflict.body.error.code, 'IDEMPOTENCY_CONFLICT');

  assert.equal(
    (await store.feed.after(0)).length,
    0,
    'a queued order has no event until the upstream answers',
  );
  assert.deepEqual(
    await store.claims.claimDueForPoll(10, { dueBy: Date.now() + 86_400_000 }),
    [],
    'never polled while queued',
  );
  assert.equal(
    (await store.claims.claimNextQueued())?.partnerRef,
    generated.body.partner_ref,
    'oldest first',
  );
  assert.equal((await store.claims.claimNextQueued())?.partnerRef, 'shop-1');
  assert.equal(await store.claims.claimNextQueued(), undefined, 'both are claimed');

  for (const [bad, code] of [
    [{ data: body.data }, 'VALIDATION_ERROR'],
    [{ product_code: 'MLBB-86', data: {} }, 'VALIDATION_ERROR'],
    [{ ...body, partner_ref: 'x'.repeat(65) }, 'VALIDATION_ERROR'],
    [{ ...body, colour: 'red' }, 'VALIDATION_ERROR'],
  ] as const) {
    const refused = await post(bad);
    assert.equal(refused.status, 400, JSON.stringify(bad));
    assert.equal(refused.body.error.code, code);
  }
  const reader = await post(body, (await store.tokens.create('reader', ['orders:read'])).token);
  assert.equal(reader.status, 403);
  assert.equal(reader.body.error.code, 'SCOPE_MISSING');

  const small = await buildApiApp({ store, submissionBacklog: 2, retryAfterS: 7 });
  await small.listen({ host: '127.0.0.1', port: 0 });
  t.after(() => small.close());
  const full = await request(
    `http://127.0.0.1:${(small.server.address() as { port: number }).port}/v1/orders`,
    {
      method: 'POST',
      headers: { authorization: `Bearer ${writer}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, partner_ref: 'one-too-many' }),
    },
  );
  assert.equal(full.statusCode, 503);
  assert.equal(full.headers['retry-after'], '7');
  assert.equal(((await full.body.json()) as { error: { code: string } }).error.code, 'BACKLOG_FULL');
  assert.equal(await store.queries.getPublicOrder('one-too-many'), undefined, 'nothing stored');
});

test('POST /v1/orders/:ref/refresh asks for an early poll of a submitted order; a queued or unknown one is refused; one the queue cannot take is 503 with Retry-After', async (t) => {
  const { store } = await tempStore(t, { now: Date.now });
  const asked: string[] = [];
  const app = await buildApiApp({
    store,
    ...defaultApiLimits(),
    requestPoll: async (ref) => {
      if (ref === 'O3') throw new Error('Redis is away');
      asked.push(ref);
    },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.after(() => app.close());
  const origin = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  const writer = (await store.tokens.create('till', ['orders:write'])).token;
  const refresh = async (ref: string, token = writer) => {
    const answer = await request(`${origin}/v1/orders/${ref}/refresh`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    // biome-ignore lint/suspicious/noExplicitAny: answers of many shapes
    return { status: answer.statusCode, headers: answer.headers, body: (await answer.body.json()) as any };
  };
  await placeOrders(store, 3);
  await store.writer.createLocalOrder({
    partnerRef: 'WAITING',
    productCode: 'ML86',
    data: { user_id: '1' },
    queued: true,
  });

  const done = await refresh('INV-O1');
  assert.equal(done.status, 202);
  assert.equal(done.body.requested, true);
  assert.equal(done.body.order.partner_ref, 'O1');
  assert.deepEqual(asked, ['O1'], 'asked by partner_ref, even when named by invoice');
  assert.equal((await refresh('WAITING')).body.error.code, 'ORDER_NOT_SUBMITTED');
  assert.equal((await refresh('NOPE')).status, 404);
  assert.equal(
    (await refresh('O1', (await store.tokens.create('reader', ['orders:read'])).token)).status,
    403,
  );
  const unqueued = await refresh('O3');
  assert.deepEqual(
    [unqueued.status, unqueued.body.error.code, unqueued.headers['retry-after']],
    [503, 'QUEUE_UNAVAILABLE', '5'],
  );
  assert.deepEqual(asked, ['O1']);
});

describeEachBackend('what refs, data and cursors may hold', (backend) => {
  test('a control character or a lone surrogate in a ref, a product code or id, a data key or value, or a query is 400 VALIDATION_ERROR naming the field and the fix; nothing is stored', async (t) => {
    const { store, origin } = await startApi(t, backend);
    const { token } = await store.tokens.create('till', ['orders:read', 'orders:write']);
    const order = { product_code: 'MLBB-86', data: { user_id: '12345678', server_id: '2001' } };
    const refusals: Array<[method: 'GET' | 'POST', path: string, body: unknown, named: RegExp]> = [
      [
        'POST',
        '/v1/orders',
        { ...order, partner_ref: 'shop\u00001' },
        /^partner_ref: .* U\+0000 at character 5: /,
      ],
      ['POST', '/v1/orders', { ...order, partner_ref: 'shop\u001b[1m' }, /^partner_ref: .* U\+001B /],
      ['POST', '/v1/orders', { ...order, partner_ref: 'shop\u007f' }, /^partner_ref: .* U\+007F /],
      ['POST', '/v1/orders', { ...order, partner_ref: 'caf\u00c3\u0083' }, /^partner_ref: .* U\+0083 /],
      [
        'POST',
        '/v1/orders',
        { ...order, partner_ref: 'shop\ud800' },
        /^partner_ref: contains a lone surrogate U\+D800 /,
      ],
      ['POST', '/v1/orders', { ...order, product_code: 'MLBB-86\u0000' }, /^product_code: /],
      [
        'POST',
        '/v1/orders',
        { product_id: '11111111-1111-4111-8111-11111111111\u0000', data: order.data },
        /^product_id: /,
      ],
      ['POST', '/v1/orders', { ...order, data: { user_id: '1234\u00005678' } }, /^data\.user_id: /],
      ['POST', '/v1/orders', { ...order, data: { 'user_id\u0000': '12345678' } }, /^data: a key contains /],
      ['GET', '/v1/orders/%00', undefined, /^ref: .* U\+0000 at character 1: /],
      ['GET', '/v1/orders/shop%0A1', undefined, /^ref: .* U\+000A at character 5: /],
      ['GET', '/v1/orders/%C2%85', undefined, /^ref: .* U\+0085 /],
      ['POST', '/v1/orders/%00/refresh', undefined, /^ref: /],
      ['GET', '/v1/orders?status=%00', undefined, /^status: /],
      ['GET', '/v1/products?category_code=%1F', undefined, /^category_code: /],
    ];
    for (const [method, path, body, named] of refusals) {
      const refused = await sendApi(origin, token, method, path, body);
      const asked = `${method} ${path} ${JSON.stringify(body) ?? ''}`;
      assert.equal(refused.status, 400, `${asked} → ${JSON.stringify(refused.body)}`);
      assert.equal(refused.body.error.code, 'VALIDATION_ERROR', asked);
      assert.match(refused.body.error.message, named, asked);
      assert.match(refused.body.error.message, /send printable text only/, asked);
    }
    assert.deepEqual(await store.queries.pageOrders({ limit: 100 }), [], 'nothing stored');
  });

  test('GET /v1/events takes any after up to 2^53 - 1 and refuses a larger one (2^53, 2^63) with 400 VALIDATION_ERROR naming the bound', async (t) => {
    const { store, call } = await startApi(t, backend);
    await placeOrders(store, 1);
    const largest = await call('/v1/events?after=9007199254740991');
    assert.equal(largest.status, 200);
    assert.deepEqual(largest.body, { data: [], next_after: 9007199254740991, has_more: false });
    for (const after of ['9007199254740992', '9223372036854775807', '9223372036854775808', '1e30']) {
      const refused = await call(`/v1/events?after=${after}`);
      assert.equal(refused.status, 400, `after=${after} → ${JSON.stringify(refused.body)}`);
      assert.equal(refused.body.error.code, 'VALIDATION_ERROR');
      assert.match(refused.body.error.message, /after must be <= 9007199254740991/);
    }
    assert.equal((await call('/v1/events?after=0')).body.data.length, 1, 'the feed still reads');
  });

  test('an order whose ref is printable Unicode goes end to end: queued, sent to the upstream under that ref, read back by it; a well-formed unknown ref is 404', async (t) => {
    const scope = cleanupScope(t);
    const { store, origin } = await startApi(scope, backend);
    const sim = await startSimulator(scope);
    const client = new UpstreamClient({ baseUrl: sim.sim.baseUrl, apiKey: sim.member.api_key });
    scope.after(() => client.close());
    const pump = startSubmissionPump({ store, client, idleMs: 20 });
    scope.after(() => pump.stop());
    const { token } = await store.tokens.create('till', ['orders:read', 'orders:write']);
    const ref = 'toko-ü 1/2 ✓ 🎮';
    const path = `/v1/orders/${encodeURIComponent(ref)}`;

    const placed = await sendApi(origin, token, 'POST', '/v1/orders', {
      product_code: 'MLBB-86',
      data: { user_id: userIdEndingIn('0007'), server_id: '2001' },
      partner_ref: ref,
    });
    assert.equal(placed.status, 202, JSON.stringify(placed.body));
    assert.equal(placed.body.partner_ref, ref);
    const accepted = await waitFor(
      async () => {
        const read = await sendApi(origin, token, 'GET', path);
        return read.body.submission === 'accepted' && read.body;
      },
      { message: 'the order accepted upstream' },
    );
    const upstream = await sim.api(`/orders/${encodeURIComponent(ref)}`);
    assert.equal(upstream.status, 200);
    assert.equal(upstream.body.partner_ref, ref, 'sent under the same ref');
    assert.equal(accepted.invoice_number, upstream.body.invoice_number);
    assert.equal(accepted.status, 'PENDING');
    const listed = await sendApi(origin, token, 'GET', '/v1/orders');
    assert.deepEqual(
      listed.body.data.map((o: { partner_ref: string }) => o.partner_ref),
      [ref],
    );
    const unknown = await sendApi(origin, token, 'GET', `/v1/orders/${encodeURIComponent('toko-ü 2')}`);
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, 'ORDER_NOT_FOUND');
  });
});

test('a body that is not JSON is 400 INVALID_JSON saying why, another content type 415, both in the error shape; an empty JSON body is no body', async (t) => {
  const { store, origin } = await startApi(t);
  const { token } = await store.tokens.create('till', ['orders:read', 'orders:write']);
  await placeOrders(store, 1);
  const send = async (path: string, contentType: string | undefined, body: string) => {
    const answer = await request(`${origin}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, ...(contentType ? { 'content-type': contentType } : {}) },
      body,
    });
    assert.match(String(answer.headers['content-type']), /^application\/json/);
    // biome-ignore lint/suspicious/noExplicitAny: an error answer or an order
    return { status: answer.statusCode, body: (await answer.body.json()) as any };
  };

  for (const [body, why] of [
    [
      '{"product_code": "MLBB-86",',
      /^the body is not JSON \(.*JSON.*\): send a JSON object with Content-Type: application\/json$/,
    ],
    ['product_code=MLBB-86', /^the body is not JSON \(Unexpected token/],
    [
      '{"__proto__": {"admin": true}, "data": {"user_id": "1"}, "product_code": "MLBB-86"}',
      /__proto__ .* prototype poisoning/,
    ],
  ] as const) {
    const refused = await send('/v1/orders', 'application/json', body);
    assert.equal(refused.status, 400, body);
    assert.deepEqual(Object.keys(refused.body), ['error'], body);
    assert.equal(refused.body.error.code, 'INVALID_JSON', body);
    assert.match(refused.body.error.message, why, body);
  }
  for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', undefined]) {
    const refused = await send(
      '/v1/orders',
      contentType,
      '{"product_code": "MLBB-86", "data": {"user_id": "1"}}',
    );
    assert.equal(refused.status, 415, String(contentType));
    assert.equal(refused.body.error.code, 'UNSUPPORTED_MEDIA_TYPE', String(contentType));
    assert.equal(refused.body.error.message, 'send the body as Content-Type: application/json');
  }
  const refresh = await send('/v1/orders/O1/refresh', 'application/json', '');
  assert.equal(refresh.status, 202, JSON.stringify(refresh.body));
  const emptyOrder = await send('/v1/orders', 'application/json', '');
  assert.equal(emptyOrder.status, 400);
  assert.equal(emptyOrder.body.error.code, 'VALIDATION_ERROR');
  assert.deepEqual(await store.queries.pageOrders({ limit: 100 }).then((p) => p.length), 1, 'nothing stored');
});

test('GET /v1/orders refuses a status it does not know with 400 naming the allowed ones, filters an upstream status string by upstream_status, and refuses created_from not before created_to', async (t) => {
  const { store, call } = await startApi(t);
  await placeOrders(store, 2);
  await store.writer.applyOrderSnapshot(snapshot('O1', 'ON_HOLD'), { source: 'poll' });

  for (const status of ['DONE', 'success', 'ON_HOLD']) {
    const refused = await call(`/v1/orders?status=${status}`);
    assert.equal(refused.status, 400, status);
    assert.equal(refused.body.error.code, 'VALIDATION_ERROR');
    assert.match(
      refused.body.error.message,
      /^querystring\/status must be one of PENDING, PROCESSING, SUCCESS, FAILED, REFUNDED, queued, pending, accepted, rejected, unknown, blocked, cancelled; /,
    );
  }
  const held = await call('/v1/orders?upstream_status=ON_HOLD');
  assert.deepEqual(
    held.body.data.map((o: { partner_ref: string }) => o.partner_ref),
    ['O1'],
  );
  assert.deepEqual(
    (await call('/v1/orders?status=accepted')).body.data.map((o: { partner_ref: string }) => o.partner_ref),
    ['O2', 'O1'],
  );

  const now = Date.now();
  const from = new Date(now).toISOString();
  for (const to of [from, new Date(now - 60_000).toISOString()]) {
    const inverted = await call(`/v1/orders?created_from=${from}&created_to=${to}`);
    assert.equal(inverted.status, 400, to);
    assert.match(inverted.body.error.message, /^created_from must be before created_to/);
  }
});

test('POST /v1/orders/:ref/refresh of a settled order answers it with 200 requested: false and queues no early poll; a SUCCESS still without its serial is polled', async (t) => {
  const { store } = await tempStore(t, { now: Date.now });
  const asked: string[] = [];
  const app = await buildApiApp({
    store,
    ...defaultApiLimits(),
    requestPoll: async (ref) => void asked.push(ref),
  });
  t.after(() => app.close());
  const writer = (await store.tokens.create('till', ['orders:write'])).token;
  const refresh = async (ref: string) => {
    const answer = await app.inject({
      method: 'POST',
      url: `/v1/orders/${ref}/refresh`,
      headers: { authorization: `Bearer ${writer}` },
    });
    return { status: answer.statusCode, body: answer.json() };
  };
  const order = async (ref: string, status: string, serial: string | null) => {
    await store.writer.createLocalOrder({
      partnerRef: ref,
      productCode: 'ML86',
      data: { user_id: '12345678', server_id: '2001' },
    });
    const applied = await store.writer.applyOrderSnapshot(snapshot(ref, status, { serial_number: serial }), {
      source: 'create',
    });
    assert.equal(applied.order.status, status, ref);
  };
  await order('DELIVERED', 'SUCCESS', 'SN-1');
  await order('NO-SERIAL', 'SUCCESS', null);
  await order('FAILED-1', 'FAILED', null);
  await order('REFUNDED-1', 'REFUNDED', 'SN-2');
  await store.writer.createLocalOrder({
    partnerRef: 'GAVE-UP',
    productCode: 'ML86',
    data: { user_id: '1' },
    queued: true,
  });
  assert.equal(
    (await store.writer.cancelOrder('GAVE-UP', { code: 'CANCELLED', detail: 'test' })).cancelled,
    true,
  );

  for (const ref of ['DELIVERED', 'INV-FAILED-1', 'REFUNDED-1', 'GAVE-UP']) {
    const settled = await refresh(ref);
    assert.equal(settled.status, 200, ref);
    assert.equal(settled.body.requested, false, ref);
    assert.deepEqual(settled.body.order, await store.queries.getPublicOrder(ref), ref);
  }
  assert.deepEqual(asked, [], 'no early poll queued for a settled order');
  const open = await refresh('NO-SERIAL');
  assert.equal(open.status, 202);
  assert.equal(open.body.requested, true);
  assert.deepEqual(asked, ['NO-SERIAL']);
});

test('a queued order shows the catalog product_name and price (amount) it was accepted at, until the upstream sends its own; without a synced catalog they are null', async (t) => {
  const { store, origin } = await startApi(t);
  const { token } = await store.tokens.create('till', ['orders:read', 'orders:write']);
  const data = { user_id: '12345678', server_id: '2001' };
  const unsynced = await sendApi(origin, token, 'POST', '/v1/orders', {
    product_code: 'ML86',
    data,
    partner_ref: 'early',
  });
  assert.equal(unsynced.status, 202);
  assert.equal(unsynced.body.product_name, null);
  assert.equal(unsynced.body.amount, null);

  await store.catalog.applySync(catalogSnapshot({ price: 15_500, balance: 1_000_000 }));
  const byCode = await sendApi(origin, token, 'POST', '/v1/orders', {
    product_code: 'ML86',
    data,
    partner_ref: 'by-code',
  });
  assert.equal(byCode.status, 202);
  assert.equal(byCode.body.submission, 'queued');
  assert.equal(byCode.body.product_name, 'ML 86');
  assert.equal(byCode.body.amount, 15_500);
  const byId = await sendApi(origin, token, 'POST', '/v1/orders', {
    product_id: '11111111-1111-4111-8111-111111111111',
    data,
    partner_ref: 'by-id',
  });
  assert.equal(byId.body.product_name, 'ML 86');
  assert.equal(byId.body.amount, 15_500);
  assert.deepEqual((await sendApi(origin, token, 'GET', '/v1/orders/by-code')).body, byCode.body);

  await store.catalog.applySync(catalogSnapshot({ price: 16_000, balance: 1_000_000 }));
  assert.equal(
    (await sendApi(origin, token, 'GET', '/v1/orders/by-code')).body.amount,
    15_500,
    'the price it was accepted at',
  );
  const claimed = (await store.claims.claimOrder('by-code'))!;
  assert.ok(claimed.claimed);
  assert.ok(
    await store.writer.startSubmission('by-code', claimed.order.claim, {
      leaseMs: store.claims.settings.leaseMs,
    }),
  );
  await store.writer.applyOrderSnapshot(
    snapshot('by-code', 'PENDING', {
      product_name: 'ml 86',
      amount: 15_250,
      created_at: new Date().toISOString(),
    }),
    { source: 'create' },
  );
  const answered = (await sendApi(origin, token, 'GET', '/v1/orders/by-code')).body;
  assert.equal(answered.submission, 'accepted');
  assert.equal(answered.product_name, 'ml 86', "the upstream's own");
  assert.equal(answered.amount, 15_250);
});
