import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { type TestContext, test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { request } from 'undici';
import { buildApiApp } from '../../src/api/app.js';
import { apiSettings, loadConfig } from '../../src/config/config.js';
import { NOTIFY_EVENT_TYPES } from '../../src/notify/event-filter.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { sendTestNotification, TEST_EVENT_TYPE } from '../../src/notify/test-notification.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import { liveOrder, startTestNotifier, verifyNotification } from '../helpers/notify.js';
import { snapshot, tempStore } from '../helpers/store.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import { cleanupScope } from '../helpers/worker.js';

/**
 * The OpenAPI document is the shop developer's contract: it is a valid OpenAPI 3.1 document,
 * every answer the real API gives (on 127.0.0.1) is one it documents, in the shape and with the
 * headers it documents, and every notification the real notifier sends is one of its `webhooks`.
 */

// biome-ignore lint/suspicious/noExplicitAny: the document is JSON read by path
type Json = any;

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

/** Every operation of `doc`: its method, path template and object. */
function operationsOf(doc: Json): { method: string; path: string; operation: Json }[] {
  return Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
    METHODS.filter((method) => item[method]).map((method) => ({ method, path, operation: item[method] })),
  );
}

/** The object `value` is, or the component its `$ref` (`#/components/…`) points to. */
function resolved(doc: Json, value: Json): Json {
  if (!value?.$ref) return value;
  return (value.$ref as string)
    .slice(2)
    .split('/')
    .reduce((node: Json, key) => node[key.replaceAll('~1', '/').replaceAll('~0', '~')], doc);
}

/**
 * `doc` with every object schema that names its properties closed to others, so a field the API
 * sends but the document does not name fails validation (an open schema accepts anything more).
 */
function closed(doc: Json): Json {
  const copy = structuredClone(doc);
  const visit = (node: Json) => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (node === null || typeof node !== 'object') return;
    if (node.properties && typeof node.properties === 'object' && node.additionalProperties === undefined) {
      const types = [node.type].flat();
      if (types.includes('object')) node.additionalProperties = false;
    }
    Object.values(node).forEach(visit);
  };
  visit(copy.components);
  visit(copy.paths);
  return copy;
}

/** Validators of the document's schemas by JSON pointer into it, and of its header values. */
function schemaChecker(doc: Json) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addSchema(closed(doc), 'openapi.json');
  const pointer = (path: string[]) =>
    `openapi.json#/${path.map((key) => key.replaceAll('~', '~0').replaceAll('/', '~1')).join('/')}`;
  const headerAjv = new Ajv2020({ strict: false, coerceTypes: true });
  return {
    /** The errors of `value` against the schema at `path` of the document, or null. */
    errors(path: string[], value: unknown): string | null {
      const validate = ajv.getSchema(pointer(path)) ?? ajv.compile({ $ref: pointer(path) });
      return validate(value) ? null : ajv.errorsText(validate.errors);
    },
    /** The errors of a header's text against its schema (integers read from their digits), or null. */
    headerErrors(schema: Json, value: string): string | null {
      const validate = headerAjv.compile({ type: 'object', properties: { value: schema } });
      return validate({ value }) ? null : headerAjv.errorsText(validate.errors);
    },
  };
}

async function documentOf(t: Pick<TestContext, 'after'>): Promise<Json> {
  const { store } = await tempStore(t);
  const app = await buildApiApp({ store, submissionBacklog: 10, retryAfterS: 60 });
  t.after(() => app.close());
  await app.ready();
  return structuredClone(app.swagger());
}

test('the OpenAPI document is a valid OpenAPI 3.1 document: a described default server, every operation named, summarised, described and secured with its scope, a webhook per notification type', async (t) => {
  const doc = await documentOf(t);
  const validator = new Validator();
  const result = await validator.validate(structuredClone(doc));
  assert.deepEqual(result.errors ?? [], [], 'valid against the OpenAPI schema');
  assert.equal(result.valid, true);
  assert.equal(validator.version, '3.1');
  assert.match(doc.openapi, /^3\.1\.\d+$/);

  assert.ok(doc.info.description.length > 200, 'info.description says what the API is');
  const { host, port } = apiSettings(loadConfig({}));
  assert.equal(doc.servers[0].url, `http://${host}:${port}`);
  assert.match(doc.servers[0].description, /API_PORT/);

  assert.deepEqual(doc.components.securitySchemes.bearer, {
    type: 'http',
    scheme: 'bearer',
    description: doc.components.securitySchemes.bearer.description,
  });
  const operations = operationsOf(doc);
  assert.equal(operations.length, 9);
  const ids = operations.map(({ operation }) => operation.operationId);
  assert.equal(new Set(ids).size, ids.length, 'operationIds are unique');
  for (const { method, path, operation } of operations) {
    const name = `${method.toUpperCase()} ${path}`;
    assert.equal(typeof operation.operationId, 'string', `${name} has an operationId`);
    assert.match(operation.operationId, /^[a-z][A-Za-z]+$/, `${name} has an operationId`);
    assert.ok(operation.summary?.length > 5, `${name} has a summary`);
    assert.ok(operation.description?.length > 40, `${name} has a description`);
    assert.ok(operation.tags?.length === 1, `${name} has a tag`);
    const scope = method === 'get' ? 'orders:read' : 'orders:write';
    assert.deepEqual(operation.security, [{ bearer: [scope] }], `${name} needs ${scope}`);
    for (const [status, response] of Object.entries(operation.responses as Record<string, Json>)) {
      assert.notEqual(response.description, 'Default Response', `${name} ${status} is described`);
      if (Number(status) >= 400) {
        assert.equal(response.content['application/json'].schema.$ref, '#/components/schemas/Error');
      }
    }
    assert.ok(operation.responses['401'].headers['WWW-Authenticate'], `${name} 401 has WWW-Authenticate`);
    assert.ok(operation.responses['429'].headers['Retry-After'], `${name} 429 has Retry-After`);
  }
  const placeOrder = operations.find((o) => o.operation.operationId === 'placeOrder')!.operation;
  assert.ok(placeOrder.responses['200'].headers['Idempotent-Replayed']);
  assert.ok(placeOrder.responses['503'].headers['Retry-After']);
  const refreshOrder = operations.find((o) => o.operation.operationId === 'refreshOrder')!.operation;
  assert.ok(refreshOrder.responses['503'].headers['Retry-After']);
  for (const name of ['Idempotent-Replayed', 'Retry-After', 'WWW-Authenticate']) {
    assert.equal(doc.components.headers[name].required, true, `${name} is sent on every answer naming it`);
  }

  assert.deepEqual(Object.keys(doc.webhooks).sort(), [...NOTIFY_EVENT_TYPES, TEST_EVENT_TYPE].sort());
  for (const [type, item] of Object.entries(doc.webhooks as Record<string, Json>)) {
    const body = resolved(doc, item.post.requestBody.content['application/json'].schema);
    assert.equal(body.properties.type.const, type);
    assert.deepEqual(
      item.post.parameters.map((p: Json) => resolved(doc, p).name),
      ['webhook-id', 'webhook-timestamp', 'webhook-signature'],
      `${type} documents the Standard Webhooks headers`,
    );
    assert.ok(item.post.operationId && item.post.summary && item.post.description, type);
  }
  // The notification body is the feed's Event without its cursor: derived, never a copy.
  const event = doc.components.schemas.Event;
  const updated = resolved(
    doc,
    doc.webhooks['order.updated'].post.requestBody.content['application/json'].schema,
  );
  assert.deepEqual(
    Object.keys(updated.properties).sort(),
    Object.keys(event.properties)
      .filter((k) => k !== 'seq')
      .sort(),
  );
  assert.deepEqual(updated.properties.timestamp, event.properties.timestamp);
});

/** A request's token (none when null; default the writer's), its body (sent as JSON unless a string) and content type. */
interface SendOptions {
  token?: string | null;
  body?: unknown;
  contentType?: string;
}

/** One request to the API and its answer, with the operation it is for. */
interface Exchange {
  method: 'GET' | 'POST';
  /** The path template of the document, e.g. `/v1/orders/{ref}`. */
  template: string;
  status: number;
  headers: IncomingHttpHeaders;
  body: unknown;
}

test('every answer of the real API, for every operation and every status, is documented: its status, its body by the documented schema, its documented headers present and well-formed', async (t) => {
  const { store } = await tempStore(t, { now: Date.now });
  const app = await buildApiApp({
    store,
    submissionBacklog: 2,
    retryAfterS: 60,
    rateLimit: { perMinute: 50 },
    requestPoll: async (ref) => {
      if (ref === 'NO-QUEUE') throw new Error('Redis is away');
    },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.after(() => app.close());
  const origin = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  const doc = structuredClone(app.swagger()) as Json;
  const checker = schemaChecker(doc);

  const writer = (await store.tokens.create('till', ['orders:read', 'orders:write'])).token;
  const reader = (await store.tokens.create('reader', ['orders:read'])).token;
  for (const [ref, status, serial] of [
    ['SENT', 'PENDING', null],
    ['DONE', 'SUCCESS', 'SN-1'],
    ['NO-QUEUE', 'PROCESSING', null],
  ] as const) {
    await store.writer.createLocalOrder({
      partnerRef: ref,
      productCode: 'ML86',
      data: { user_id: '12345678', server_id: '2001' },
    });
    await store.writer.applyOrderSnapshot(snapshot(ref, status, { serial_number: serial }), {
      source: 'create',
    });
  }
  assert.equal((await store.queries.getPublicOrder('INV-DONE'))?.outcome, 'delivered');
  await store.catalog.applySync(catalogSnapshot({ balance: 1_000_000 }));

  const exchanges: Exchange[] = [];
  const send = async (
    method: 'GET' | 'POST',
    template: string,
    path: string,
    {
      token = writer,
      body,
      contentType,
    }: { token?: string | null; body?: unknown; contentType?: string } = {},
  ) => {
    const answer = await request(`${origin}${path}`, {
      method,
      headers: {
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { 'content-type': contentType ?? 'application/json' }),
      },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    const exchange = {
      method,
      template,
      status: answer.statusCode,
      headers: answer.headers,
      body: await answer.body.json(),
    };
    exchanges.push(exchange);
    return exchange;
  };
  const order = { product_code: 'ML86', data: { user_id: '12345678' }, partner_ref: 'shop-1' };

  const invalid = `h2h_AAAAAAAAAAAA_${'x'.repeat(43)}`;
  // In this order: the backlog of 2 is full at the fourth order placed; shop-1 is cancelled last.
  const sequence: [
    method: 'GET' | 'POST',
    template: string,
    path: string,
    options: SendOptions,
    status: number,
  ][] = [
    ['POST', '/v1/orders', '/v1/orders', { body: order }, 202],
    ['POST', '/v1/orders', '/v1/orders', { body: order }, 200],
    ['POST', '/v1/orders', '/v1/orders', { body: { ...order, data: { user_id: '87654321' } } }, 409],
    [
      'POST',
      '/v1/orders',
      '/v1/orders',
      { body: { ...order, partner_ref: 'shop-2', product_code: 'NOPE' } },
      422,
    ],
    ['POST', '/v1/orders', '/v1/orders', { body: { ...order, partner_ref: 'x'.repeat(65) } }, 400],
    ['POST', '/v1/orders', '/v1/orders', { body: '{"data": ' }, 400],
    ['POST', '/v1/orders', '/v1/orders', { body: 'product ML86', contentType: 'text/plain' }, 415],
    ['POST', '/v1/orders', '/v1/orders', { body: order, token: reader }, 403],
    ['POST', '/v1/orders', '/v1/orders', { body: order, token: null }, 401],
    ['POST', '/v1/orders', '/v1/orders', { body: { ...order, partner_ref: 'shop-3' } }, 202],
    ['POST', '/v1/orders', '/v1/orders', { body: { ...order, partner_ref: 'shop-4' } }, 503],
    ['GET', '/v1/orders', '/v1/orders?limit=2', {}, 200],
    ['GET', '/v1/orders', '/v1/orders?status=SUCCESS', {}, 200],
    ['GET', '/v1/orders', '/v1/orders?limit=0', {}, 400],
    ['GET', '/v1/orders', '/v1/orders?cursor=bm9wZQ', {}, 400],
    ['GET', '/v1/orders', '/v1/orders', { token: invalid }, 401],
    ['GET', '/v1/orders/{ref}', '/v1/orders/shop-1', {}, 200],
    ['GET', '/v1/orders/{ref}', '/v1/orders/INV-DONE', { token: reader }, 200],
    ['GET', '/v1/orders/{ref}', '/v1/orders/NOPE', {}, 404],
    ['POST', '/v1/orders/{ref}/refresh', '/v1/orders/SENT/refresh', {}, 202],
    ['POST', '/v1/orders/{ref}/refresh', '/v1/orders/DONE/refresh', {}, 200],
    ['POST', '/v1/orders/{ref}/refresh', '/v1/orders/shop-1/refresh', {}, 409],
    ['POST', '/v1/orders/{ref}/refresh', '/v1/orders/NO-QUEUE/refresh', {}, 503],
    ['POST', '/v1/orders/{ref}/refresh', '/v1/orders/NOPE/refresh', {}, 404],
    ['POST', '/v1/orders/{ref}/refresh', '/v1/orders/SENT/refresh', { token: reader }, 403],
    ['POST', '/v1/orders/{ref}/cancel', '/v1/orders/SENT/cancel', {}, 409],
    ['POST', '/v1/orders/{ref}/cancel', '/v1/orders/NOPE/cancel', {}, 404],
    ['POST', '/v1/orders/{ref}/cancel', '/v1/orders/SENT/cancel', { body: '{' }, 400],
    ['POST', '/v1/orders/{ref}/cancel', '/v1/orders/shop-1/cancel', {}, 200],
    ['GET', '/v1/events', '/v1/events?limit=3', {}, 200],
    ['GET', '/v1/events', '/v1/events?after=-1', {}, 400],
    ['GET', '/v1/categories', '/v1/categories', {}, 200],
    ['GET', '/v1/products', '/v1/products?category_code=ML', {}, 200],
    ['GET', '/v1/products', '/v1/products?colour=red', {}, 400],
    ['GET', '/v1/products', '/v1/products?category_code=NOPE', {}, 400],
    ['GET', '/v1/balance', '/v1/balance', { token: reader }, 200],
    ['GET', '/v1/balance', '/v1/balance', { token: null }, 401],
  ];
  for (const [method, template, path, options, status] of sequence) {
    const answer = await send(method, template, path, options);
    assert.equal(answer.status, status, `${method} ${path}: ${JSON.stringify(answer.body)}`);
  }
  // Last: spend the reader's budget until the limit answers.
  let limited: Exchange | undefined;
  for (let i = 0; i < 60 && !limited; i++) {
    const answer = await send('GET', '/v1/balance', '/v1/balance', { token: reader });
    if (answer.status === 429) limited = answer;
  }
  assert.ok(limited, 'the rate limit answered 429');

  const problems: string[] = [];
  const seen = new Set<string>();
  for (const { method, template, status, headers, body } of exchanges) {
    const operation = doc.paths[template]?.[method.toLowerCase()];
    const name = `${method} ${template} → ${status}`;
    if (!operation) {
      problems.push(`${name}: no such operation`);
      continue;
    }
    seen.add(`${operation.operationId} ${status}`);
    const response = operation.responses[String(status)];
    if (!response) {
      problems.push(`${name}: status not documented for ${operation.operationId}`);
      continue;
    }
    const bodyErrors = checker.errors(
      [
        'paths',
        template,
        method.toLowerCase(),
        'responses',
        String(status),
        'content',
        'application/json',
        'schema',
      ],
      body,
    );
    if (bodyErrors) problems.push(`${name}: body ${bodyErrors}: ${JSON.stringify(body)}`);
    if (status >= 400) {
      const code = (body as { error: { code: string } }).error.code;
      if (!response.description.includes(`\`${code}\``) && status !== 429) {
        problems.push(`${name}: code ${code} is not among the answer's documented codes`);
      }
    }
    for (const [headerName, header] of Object.entries(response.headers ?? {})) {
      const { schema } = resolved(doc, header);
      const value = headers[headerName.toLowerCase()];
      if (typeof value !== 'string') {
        problems.push(`${name}: documented header ${headerName} is missing`);
        continue;
      }
      const headerErrors = checker.headerErrors(schema, value);
      if (headerErrors) problems.push(`${name}: header ${headerName}: ${value}: ${headerErrors}`);
    }
  }
  assert.deepEqual(problems, []);

  for (const { operation } of operationsOf(doc)) {
    assert.ok(
      [...seen].some((s) => s.startsWith(`${operation.operationId} 2`)),
      `${operation.operationId} answered 2xx`,
    );
  }
  assert.deepEqual(
    [...new Set([...seen].map((s) => Number(s.split(' ')[1])))].sort(),
    [200, 202, 400, 401, 403, 404, 409, 415, 422, 429, 503],
  );
});

test('every notification the notifier and `endpoints test` send is the documented webhook of its type: its body by the schema, its Standard Webhooks headers present and well-formed', async (t) => {
  const scope = cleanupScope(t);
  const { store } = await tempStore(scope, { now: Date.now, balanceLowThreshold: 500_000 });
  const sink = await startWebhookSink(scope, { secrets: [] });
  const secret = generateEndpointSecret();
  const endpoint = await store.endpoints.add({ url: sink.url, events: ['*'], secret });
  const doc = await documentOf(scope);
  const checker = schemaChecker(doc);

  await startTestNotifier(scope, { store });
  await liveOrder(store, 'N-1');
  await store.writer.createLocalOrder({
    partnerRef: 'N-2',
    productCode: 'ML86',
    data: { user_id: '1' },
    queued: true,
  });
  assert.equal(
    (await store.writer.cancelOrder('N-2', { code: 'CANCELLED', detail: 'by the test' })).cancelled,
    true,
  );
  await store.catalog.applySync(catalogSnapshot({ price: 15_000, balance: 1_000_000 }));
  await store.catalog.applySync(catalogSnapshot({ price: 16_000, balance: 100_000 }));
  const sent = await sendTestNotification((await store.endpoints.get(endpoint.id))!);
  assert.equal(sent.ok, true);

  const types = [
    'order.submitted',
    'order.updated',
    'order.cancelled',
    'product.price_changed',
    'balance.low',
    TEST_EVENT_TYPE,
  ];
  const deliveries = await sink.waitForDeliveries(() => true, 8, { message: 'eight notifications' });
  const problems: string[] = [];
  for (const delivery of deliveries) {
    const body = verifyNotification(secret, delivery) as Json;
    const webhook = doc.webhooks[body.type]?.post;
    if (!webhook) {
      problems.push(`${body.type}: no webhook documents it`);
      continue;
    }
    assert.equal(delivery.headers['content-type'], 'application/json');
    const errors = checker.errors(
      ['webhooks', body.type, 'post', 'requestBody', 'content', 'application/json', 'schema'],
      body,
    );
    if (errors) problems.push(`${body.type}: body ${errors}: ${delivery.rawBody.toString('utf8')}`);
    for (const parameter of webhook.parameters.map((p: Json) => resolved(doc, p))) {
      const value = delivery.headers[parameter.name];
      const headerErrors =
        typeof value === 'string' ? checker.headerErrors(parameter.schema, value) : 'missing';
      if (headerErrors) problems.push(`${body.type}: header ${parameter.name}: ${value}: ${headerErrors}`);
    }
  }
  assert.deepEqual(problems, []);
  assert.deepEqual(
    [
      ...new Set(deliveries.map((d) => (JSON.parse(d.rawBody.toString('utf8')) as { type: string }).type)),
    ].sort(),
    types.sort(),
  );
});
