import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { buildApiApp } from '../../src/api/app.js';
import { startApi } from '../../src/api/server.js';
import { apiSettings, ConfigError, loadConfig } from '../../src/config/config.js';
import { defaultApiLimits } from '../helpers/api.js';
import { freezableProxy } from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { tempStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope } from '../helpers/worker.js';

/** GET `path` of the API at `origin` with `token` (none when null): status, headers and JSON body. */
async function get(origin: string, path: string, token: string | null) {
  const answer = await request(`${origin}${path}`, {
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
  });
  // biome-ignore lint/suspicious/noExplicitAny: the answers have many shapes; each test reads its own
  const body = (await answer.body.json()) as any;
  return { status: answer.statusCode, headers: answer.headers, body };
}

/** The keys of Redis at `url` matching `pattern`, sorted. */
async function redisKeys(url: string, pattern: string): Promise<string[]> {
  const connection = new Redis(url);
  try {
    return (await connection.keys(pattern)).sort();
  } finally {
    connection.disconnect();
  }
}

/** The API app on a real port of 127.0.0.1, its counts in memory, `perMinute` requests per token. */
async function startLimitedApp(t: Pick<TestContext, 'after'>, perMinute: number) {
  const { store } = await tempStore(t, { now: Date.now });
  const app = await buildApiApp({ store, ...defaultApiLimits(), rateLimit: { perMinute } });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.after(() => app.close());
  const { port } = app.server.address() as { port: number };
  return { store, origin: `http://127.0.0.1:${port}` };
}

test('a token past its requests a minute gets 429 RATE_LIMITED in the error shape with Retry-After; every answer says the limit, what remains and when it resets', async (t) => {
  const { store, origin } = await startLimitedApp(t, 3);
  const { token, info } = await store.tokens.create('till', ['orders:read']);

  for (const remaining of [2, 1, 0]) {
    const answer = await get(origin, '/v1/orders', token);
    assert.equal(answer.status, 200);
    assert.equal(answer.headers['x-ratelimit-limit'], '3');
    assert.equal(answer.headers['x-ratelimit-remaining'], String(remaining));
    const reset = Number(answer.headers['x-ratelimit-reset']);
    assert.ok(reset >= 1 && reset <= 60, `x-ratelimit-reset ${reset} is within the minute`);
  }

  const refused = await get(origin, '/v1/orders', token);
  assert.equal(refused.status, 429);
  assert.deepEqual(Object.keys(refused.body), ['error']);
  assert.equal(refused.body.error.code, 'RATE_LIMITED');
  const retryAfter = Number(refused.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  assert.equal(
    refused.body.error.message,
    `token ${info.id} (till) made its 3 requests of this minute (API_RATE_LIMIT_PER_MIN); retry in ${retryAfter} s (Retry-After)`,
  );
  assert.equal(refused.headers['x-ratelimit-limit'], '3');
  assert.equal(refused.headers['x-ratelimit-remaining'], '0');
  assert.equal(refused.headers['x-ratelimit-reset'], String(retryAfter));
});

test('one token past its limit leaves another token its whole budget', async (t) => {
  const { store, origin } = await startLimitedApp(t, 2);
  const busy = (await store.tokens.create('busy till', ['orders:read'])).token;
  const quiet = (await store.tokens.create('quiet till', ['orders:read'])).token;
  const statuses = [];
  for (let i = 0; i < 3; i++) statuses.push((await get(origin, '/v1/balance', busy)).status);
  assert.deepEqual(statuses, [200, 200, 429]);

  const other = await get(origin, '/v1/balance', quiet);
  assert.equal(other.status, 200);
  assert.equal(other.headers['x-ratelimit-remaining'], '1');
});

test('a request refused for its token is answered 401 or 403 as before and spends no budget', async (t) => {
  const { store, origin } = await startLimitedApp(t, 2);
  const writer = (await store.tokens.create('writer only', ['orders:write'])).token;
  for (let i = 0; i < 3; i++) {
    const missing = await get(origin, '/v1/orders', null);
    assert.equal(missing.status, 401);
    assert.equal(missing.body.error.code, 'TOKEN_MISSING');
    assert.equal((await get(origin, '/v1/orders', `h2h_AAAAAAAAAAAA_${'x'.repeat(43)}`)).status, 401);
    const forbidden = await get(origin, '/v1/orders', writer);
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.body.error.code, 'SCOPE_MISSING');
  }
  // The writer's three refusals spent nothing of its budget: its first request that passes spends one.
  const placed = await request(`${origin}/v1/orders/NOPE/cancel`, {
    method: 'POST',
    headers: { authorization: `Bearer ${writer}` },
  });
  await placed.body.dump();
  assert.equal(placed.statusCode, 404);
  assert.equal(placed.headers['x-ratelimit-remaining'], '1');
});

test('the OpenAPI document gives every operation its 429 RATE_LIMITED answer with Retry-After, and the rate-limit headers on every answer but a refusal of the token', async (t) => {
  const { origin } = await startLimitedApp(t, 3);
  const doc = (await get(origin, '/openapi.json', null)).body;
  const counted = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'];
  for (const name of [...counted, 'Retry-After']) {
    assert.equal(doc.components.headers[name].schema.type, 'integer', name);
  }
  const operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods as object).map(([method, operation]) => ({
      name: `${method} ${path}`,
      operation,
    })),
  );
  assert.equal(operations.length, 9);
  for (const { name, operation } of operations) {
    const limited = operation.responses['429'];
    assert.deepEqual(
      limited.content['application/json'].schema,
      { $ref: '#/components/schemas/Error' },
      name,
    );
    assert.deepEqual(Object.keys(limited.headers), ['Retry-After', ...counted], name);
    for (const [status, response] of Object.entries(operation.responses) as [
      string,
      { headers?: object },
    ][]) {
      const headers = Object.keys(response.headers ?? {});
      if (status === '401' || status === '403') {
        assert.deepEqual(
          headers.filter((header) => counted.includes(header)),
          [],
          `${name} ${status}`,
        );
      } else for (const header of counted) assert.ok(headers.includes(header), `${name} ${status} ${header}`);
    }
  }
});

/**
 * The API process (`startApi`) on the store at `path` and the Redis at `redisUrl`, with
 * API_RATE_LIMIT_PER_MIN `perMinute`; stopped when the test ends.
 */
async function startApiProcess(
  t: Pick<TestContext, 'after'>,
  redisUrl: string,
  path: string,
  perMinute: string,
  env: Record<string, string> = {},
) {
  const api = await startApi(
    loadConfig({
      REDIS_URL: redisUrl,
      H2H_DB_PATH: path,
      API_PORT: '0',
      API_RATE_LIMIT_PER_MIN: perMinute,
      ...env,
    }),
  );
  t.after(() => api.close());
  return api;
}

test('two API processes on one Redis draw a token from one budget; its count is kept under the token id, never the secret', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const { store, path } = await tempStore(t, { now: Date.now });
  const a = await startApiProcess(t, redis.url, path, '4');
  const b = await startApiProcess(t, redis.url, path, '4');
  // Each process's connection to Redis opens after it listens, and until then a request is not
  // counted (served without a limit, as while Redis is away): wait until each one counts.
  for (const api of [a, b]) {
    const probe = (await store.tokens.create(`probe ${api.origin}`, ['orders:read'])).token;
    await waitFor(
      async () => Number((await get(api.origin, '/v1/balance', probe)).headers['x-ratelimit-remaining']) < 4,
      { message: `${api.origin} counting in Redis` },
    );
  }
  const { token, info } = await store.tokens.create('till', ['orders:read']);

  const answers = [];
  for (const api of [a, b, a, b, a, b]) answers.push(await get(api.origin, '/v1/balance', token));
  assert.deepEqual(
    answers.map((x) => [x.status, x.headers['x-ratelimit-remaining']]),
    [
      [200, '3'],
      [200, '2'],
      [200, '1'],
      [200, '0'],
      [429, '0'],
      [429, '0'],
    ],
  );
  assert.equal(answers[5]!.body.error.code, 'RATE_LIMITED');

  const keys = await redisKeys(redis.url, 'h2h-sync:api-rate:*');
  assert.ok(keys.includes(`h2h-sync:api-rate:token:${info.id}`), keys.join(', '));
  const secret = token.slice(`h2h_${info.id}_`.length);
  assert.ok(!keys.some((key) => key.includes(secret)), 'no secret in a key');
});

test('with Redis frozen (connections accepted, nothing answered) the API still answers, uncounted, instead of waiting on it', {
  timeout: 30_000,
}, async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const proxy = await freezableProxy(t, { port: Number(new URL(redis.url).port) });
  const { store, path } = await tempStore(t, { now: Date.now });
  const api = await startApiProcess(t, proxy.url, path, '2');
  const { token } = await store.tokens.create('till', ['orders:read']);
  await waitFor(
    async () => (await get(api.origin, '/v1/balance', token)).headers['x-ratelimit-remaining'] === '1',
    { message: 'the API counting in Redis' },
  );
  proxy.freeze();

  for (let i = 0; i < 3; i++) {
    const answer = await get(api.origin, '/v1/balance', token);
    assert.equal(answer.status, 200);
    assert.equal(answer.headers['x-ratelimit-remaining'], '2', 'not counted: the whole budget shows');
  }
});

test('API_RATE_LIMIT_PER_MIN=0 turns the limit off: no 429 and no rate-limit headers', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const { store, path } = await tempStore(t, { now: Date.now });
  const api = await startApiProcess(t, redis.url, path, '0');
  const { token } = await store.tokens.create('till', ['orders:read']);
  for (let i = 0; i < 5; i++) {
    const answer = await get(api.origin, '/v1/balance', token);
    assert.equal(answer.status, 200);
    assert.equal(answer.headers['x-ratelimit-limit'], undefined);
    assert.equal(answer.headers['x-ratelimit-remaining'], undefined);
  }
  assert.deepEqual(await redisKeys(redis.url, 'h2h-sync:api-rate:*'), []);
});

test('behind a proxy API_TRUST_PROXY names, a request is counted under the client address its X-Forwarded-For gives; without the setting, under the address it came from', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const { path } = await tempStore(t, { now: Date.now });
  const client = '203.0.113.7';
  // The OpenAPI document needs no token: its requests are counted under the request's address.
  const countedUnder = async (env: Record<string, string>) => {
    const api = await startApiProcess(t, redis.url, path, '600', env);
    const connection = new Redis(redis.url);
    t.after(() => connection.disconnect());
    await connection.flushall();
    // Until the process's connection to Redis is open a request is not counted: ask until one is.
    return waitFor(
      async () => {
        const answer = await request(`${api.origin}/openapi.json`, {
          headers: { 'x-forwarded-for': client },
        });
        await answer.body.dump();
        const keys = await redisKeys(redis.url, 'h2h-sync:api-rate:*');
        return keys.length > 0 ? keys : undefined;
      },
      { message: 'a request counted in Redis' },
    );
  };

  assert.deepEqual(await countedUnder({ API_TRUST_PROXY: '127.0.0.1' }), [`h2h-sync:api-rate:ip:${client}`]);
  assert.deepEqual(await countedUnder({}), ['h2h-sync:api-rate:ip:127.0.0.1']);
  assert.deepEqual(await countedUnder({ API_TRUST_PROXY: '10.0.0.0/8' }), ['h2h-sync:api-rate:ip:127.0.0.1']);
});

test('API_TRUST_PROXY is off by default; true, or addresses and ranges, turn it on; anything else stops the start naming the variable', () => {
  assert.equal(apiSettings(loadConfig({})).trustProxy, false);
  assert.equal(apiSettings(loadConfig({ API_TRUST_PROXY: 'true' })).trustProxy, true);
  assert.deepEqual(apiSettings(loadConfig({ API_TRUST_PROXY: '10.0.0.0/8, ::1,loopback' })).trustProxy, [
    '10.0.0.0/8',
    '::1',
    'loopback',
  ]);
  for (const value of ['yes', 'proxy.local', '10.0.0.0/33']) {
    assert.throws(
      () => loadConfig({ API_TRUST_PROXY: value }),
      (err: unknown) => err instanceof ConfigError && err.message.includes(`API_TRUST_PROXY="${value}"`),
      value,
    );
  }
});

test('API_RATE_LIMIT_PER_MIN is 600 by default, 0 is off, and a negative or fractional one stops the start naming the variable', () => {
  assert.equal(apiSettings(loadConfig({})).rateLimitPerMin, 600);
  assert.equal(apiSettings(loadConfig({ API_RATE_LIMIT_PER_MIN: '0' })).rateLimitPerMin, 0);
  for (const value of ['-1', '1.5', 'many']) {
    assert.throws(
      () => loadConfig({ API_RATE_LIMIT_PER_MIN: value }),
      (err: unknown) =>
        err instanceof ConfigError && err.message.includes(`API_RATE_LIMIT_PER_MIN="${value}"`),
      value,
    );
  }
});
