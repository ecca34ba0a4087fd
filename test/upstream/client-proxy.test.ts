import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, type TestContext, test } from 'node:test';
import { Redis } from 'ioredis';
import { freePort } from '../../src/dev/redis-server.js';
import { RateBudget, type RateBudgetOptions } from '../../src/rate-budget/rate-budget.js';
import { UpstreamClient, type UpstreamClientOptions } from '../../src/upstream/client.js';
import { UpstreamError, UpstreamUnreachableError } from '../../src/upstream/errors.js';
import { privateRedis } from '../helpers/redis.js';
import { snapshot } from '../helpers/store.js';

type Context = Pick<TestContext, 'after'>;

interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
  /** When the request arrived (`performance.now()`). */
  at: number;
}

/**
 * A real HTTP server on 127.0.0.1 standing in for what sits in front of the upstream (a proxy, a
 * load balancer) and answers what the simulator never does. It records every request it gets.
 */
async function frontServer(
  t: Context,
  handle: (req: IncomingMessage, res: ServerResponse, n: number) => void,
) {
  const seen: SeenRequest[] = [];
  const server = createServer((req, res) => {
    const request: SeenRequest = {
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      body: '',
      at: performance.now(),
    };
    seen.push(request);
    const n = seen.length;
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      request.body += chunk;
    });
    req.on('end', () => handle(req, res, n));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const { port } = server.address() as AddressInfo;
  return { origin: `http://127.0.0.1:${port}`, seen };
}

function client(t: Context, baseUrl: string, options: Partial<UpstreamClientOptions> = {}) {
  const upstream = new UpstreamClient({
    baseUrl,
    apiKey: 'key_under_test',
    retry: { maxAttempts: 3, baseDelayMs: 5, maxDelayMs: 20 },
    ...options,
  });
  t.after(() => upstream.close());
  return upstream;
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

const TOO_MANY = { statusCode: 429, message: 'TOO_MANY_REQUESTS', error: 'Too Many Requests' };

/**
 * An upstream whose rolling window is full: it answers 429 without Retry-After to every request
 * for `windowMs` from its first refusal, then `answer`.
 */
function fullForOneWindow(windowMs: number, answer: (res: ServerResponse) => void) {
  let firstRefusal: number | undefined;
  return (_req: IncomingMessage, res: ServerResponse) => {
    const now = performance.now();
    firstRefusal ??= now;
    if (now - firstRefusal < windowMs) json(res, 429, TOO_MANY);
    else answer(res);
  };
}

/** A real rate budget on a private Redis, closed when the test ends. */
async function rateBudget(t: Context, options: Partial<RateBudgetOptions>): Promise<RateBudget> {
  const redis = new Redis((await privateRedis(t)).url);
  t.after(() => redis.quit());
  return new RateBudget({ redis, apiKey: 'key_under_test', ...options });
}

/** Ms between the server's first two requests. */
function gapMs(seen: SeenRequest[]): number {
  return seen[1]!.at - seen[0]!.at;
}

const PRODUCT = {
  id: '5f0c1d2e-0000-4000-8000-000000000001',
  code: 'MLBB-86',
  name: '86 Diamonds',
  category_code: 'MLBB',
  price: 19_500,
  is_active: true,
};

describe('UpstreamClient against answers the simulator does not give', () => {
  test('a non-JSON 502 from a proxy becomes UpstreamError BAD_GATEWAY with its status, after the retries', async (t) => {
    const front = await frontServer(t, (_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<html><body><h1>502 Bad Gateway</h1>\n<hr>nginx</body></html>');
    });

    await assert.rejects(client(t, front.origin).profile(), (error: unknown) => {
      assert.ok(error instanceof UpstreamError);
      assert.equal(error.status, 502);
      assert.equal(error.code, 'BAD_GATEWAY');
      assert.match(error.detail, /502 Bad Gateway/);
      assert.equal(error.retryable, true);
      assert.match(error.message, /retry later/);
      return true;
    });
    assert.equal(front.seen.length, 3);
  });

  test('products under a data envelope are accepted like a plain array', async (t) => {
    const front = await frontServer(t, (_req, res) => json(res, 200, { data: [PRODUCT] }));

    assert.deepEqual(await client(t, front.origin).products({ categoryCode: 'MLBB' }), [PRODUCT]);
    assert.equal(front.seen[0]?.url, '/v1/member-api/products?category_code=MLBB');
  });

  test('a base URL without the API prefix gets /v1/member-api; the key goes in x-api-key by default', async (t) => {
    const front = await frontServer(t, (_req, res) => json(res, 200, []));

    await client(t, `${front.origin}/`).categories();

    assert.equal(front.seen[0]?.url, '/v1/member-api/categories');
    assert.equal(front.seen[0]?.headers['x-api-key'], 'key_under_test');
    assert.equal(front.seen[0]?.headers.authorization, undefined);
  });

  test('without a budget, a 429 without Retry-After is retried after one whole rate window', async (t) => {
    const front = await frontServer(
      t,
      fullForOneWindow(400, (res) => json(res, 200, [PRODUCT])),
    );

    const products = await client(t, front.origin, { rateWindowMs: 400 }).products();

    assert.deepEqual(products, [PRODUCT]);
    assert.equal(front.seen.length, 2, 'one refusal, then the retry after the window');
    assert.ok(gapMs(front.seen) >= 400, `retried ${Math.round(gapMs(front.seen))} ms after the refusal`);
  });

  test('without a budget the rate window is the spec’s minute: beyond maxRetryAfterMs the 429 surfaces at once', async (t) => {
    const front = await frontServer(t, (_req, res) => json(res, 429, TOO_MANY));

    const refused = client(t, front.origin, { retry: { maxRetryAfterMs: 10_000 } }).profile();

    await assert.rejects(refused, (error: unknown) => {
      assert.ok(error instanceof UpstreamError);
      assert.equal(error.status, 429);
      assert.equal(error.attempts, 1);
      assert.equal(error.retryAfterMs, 60_000);
      return true;
    });
    assert.equal(front.seen.length, 1);
  });

  test('with a budget, a 429 without Retry-After is retried once the upstream’s window can have room, and the order is created', async (t) => {
    const windowMs = 1500;
    const input = {
      product_code: 'ML86',
      partner_ref: 'ref-429',
      data: { user_id: '12345678', server_id: '2001' },
    };
    const front = await frontServer(
      t,
      fullForOneWindow(windowMs, (res) => json(res, 201, snapshot('ref-429', 'PENDING'))),
    );
    const budget = await rateBudget(t, { windowMs });
    // The default retry policy: its backoff of 0–250, 0–500 and 0–1000 ms stays inside the window.
    const upstream = client(t, front.origin, { budget, retry: {} });

    const order = await upstream.createOrder(input);

    assert.equal(order.partner_ref, 'ref-429');
    assert.equal(order.status, 'PENDING');
    assert.equal(front.seen.length, 2, 'one refusal, then one retry that found room');
    assert.ok(
      gapMs(front.seen) >= windowMs,
      `the retry reached the upstream ${Math.round(gapMs(front.seen))} ms after the refusal, inside its ${windowMs} ms window`,
    );
    assert.deepEqual(JSON.parse(front.seen[1]!.body), input);
  });

  test('a status poll does not wait for the rate window after a 429 without Retry-After: it surfaces the 429 with when the window has room', async (t) => {
    const front = await frontServer(t, (_req, res) => json(res, 429, TOO_MANY));
    const budget = await rateBudget(t, { windowMs: 60_000, marginMs: 1000 });

    const polled = client(t, front.origin, { budget }).getOrder('ref-1');

    await assert.rejects(polled, (error: unknown) => {
      assert.ok(error instanceof UpstreamError);
      assert.equal(error.status, 429);
      assert.equal(error.attempts, 1);
      assert.ok(
        error.retryAfterMs !== undefined && error.retryAfterMs > 50_000 && error.retryAfterMs <= 61_000,
        `retryAfterMs ${error.retryAfterMs}`,
      );
      return true;
    });
    assert.equal(front.seen.length, 1);
  });

  test('a 5xx to createOrder is repeated with the same body and, at the end, marks the outcome unknown', async (t) => {
    const front = await frontServer(t, (_req, res) =>
      json(res, 500, { statusCode: 500, message: 'INTERNAL_ERROR', error: 'Internal Server Error' }),
    );
    const input = {
      product_code: 'MLBB-86',
      partner_ref: 'ref-5xx',
      data: { user_id: '12345678', server_id: '2001' },
    };

    await assert.rejects(client(t, front.origin).createOrder(input), (error: unknown) => {
      assert.ok(error instanceof UpstreamError);
      assert.equal(error.code, 'INTERNAL_ERROR');
      assert.equal(error.outcomeUnknown, true);
      return true;
    });
    assert.equal(front.seen.length, 3);
    for (const request of front.seen) {
      assert.equal(`${request.method} ${request.url}`, 'POST /v1/member-api/orders');
      assert.deepEqual(JSON.parse(request.body), input);
    }
  });

  test('a body that stalls past bodyTimeoutMs is a TIMEOUT, retried for a GET', async (t) => {
    const front = await frontServer(t, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('[');
    });

    await assert.rejects(
      client(t, front.origin, { bodyTimeoutMs: 100, retry: { maxAttempts: 2, baseDelayMs: 5 } }).categories(),
      (error: unknown) =>
        error instanceof UpstreamUnreachableError && error.code === 'TIMEOUT' && error.attempts === 2,
    );
    assert.equal(front.seen.length, 2);
  });

  test('a refused connection is NETWORK_ERROR after every attempt, its outcome unknown', async (t) => {
    const port = await freePort();

    await assert.rejects(client(t, `http://127.0.0.1:${port}`).getOrder('ref-1'), (error: unknown) => {
      assert.ok(error instanceof UpstreamUnreachableError);
      assert.equal(error.code, 'NETWORK_ERROR');
      assert.equal(error.outcomeUnknown, true);
      assert.equal(error.attempts, 3);
      assert.match(error.message, /outcome is unknown, not failed/);
      return true;
    });
  });

  test('a 2xx that is not JSON is INVALID_RESPONSE, not retried', async (t) => {
    const front = await frontServer(t, (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('OK');
    });

    await assert.rejects(
      client(t, front.origin).profile(),
      (error: unknown) =>
        error instanceof UpstreamError && error.code === 'INVALID_RESPONSE' && error.status === 200,
    );
    assert.equal(front.seen.length, 1);
  });

  test('wrong options throw at construction', () => {
    const base = { baseUrl: 'http://127.0.0.1:1', apiKey: 'k' };

    assert.throws(() => new UpstreamClient({ ...base, baseUrl: 'not a url' }), /baseUrl is not a URL/);
    assert.throws(() => new UpstreamClient({ ...base, baseUrl: 'ftp://host' }), /http or https/);
    assert.throws(() => new UpstreamClient({ ...base, apiKey: '' }), /apiKey is required/);
    assert.throws(
      () => new UpstreamClient({ ...base, authStyle: 'basic' as unknown as 'bearer' }),
      /authStyle must be/,
    );
    assert.throws(() => new UpstreamClient({ ...base, headersTimeoutMs: 0 }), /headersTimeoutMs/);
    assert.throws(() => new UpstreamClient({ ...base, retry: { maxAttempts: 0 } }), /maxAttempts/);
    assert.throws(() => new UpstreamClient({ ...base, rateWindowMs: 0 }), /rateWindowMs/);
  });
});
