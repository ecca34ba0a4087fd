import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import {
  BudgetExhaustedError,
  RateBudget,
  type RateBudgetOptions,
} from '../../src/rate-budget/rate-budget.js';
import { UpstreamClient, type UpstreamClientOptions } from '../../src/upstream/client.js';
import { OrderInputError, UpstreamError, UpstreamUnreachableError } from '../../src/upstream/errors.js';
import { privateRedis } from '../helpers/redis.js';
import {
  DEMO_MEMBERS,
  orderInput,
  startSimulator,
  type TestSimulator,
  uniqueRef,
} from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';

type Context = Parameters<typeof startSimulator>[0];

interface AttemptLine {
  method: string;
  path: string;
  status: number | string;
  attempt: number;
  durationMs: number;
  code?: string;
  retryInMs?: number;
}

/** A debug logger that keeps the client's lines, to count and inspect its attempts. */
function captureLog() {
  const raw: string[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void raw.push(line) });
  const attempts = () =>
    raw.map((line) => JSON.parse(line)).filter((line) => line.msg === 'upstream call') as AttemptLine[];
  return { logger, raw, attempts };
}

/** A client of the simulator with fast retries, closed when the test ends. */
function clientFor(t: Context, sim: TestSimulator, options: Partial<UpstreamClientOptions> = {}) {
  const log = captureLog();
  const client = new UpstreamClient({
    baseUrl: sim.sim.baseUrl,
    apiKey: sim.member.api_key,
    retry: { baseDelayMs: 5, maxDelayMs: 50 },
    logger: log.logger,
    ...options,
  });
  t.after(() => client.close());
  return { client, ...log };
}

async function budgetFor(t: Context, apiKey: string, options: Partial<RateBudgetOptions> = {}) {
  const server = await privateRedis(t);
  const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
  t.after(() => redis.disconnect());
  return new RateBudget({ redis, apiKey, ...options });
}

describe('UpstreamClient against the simulator', () => {
  test('every endpoint answers typed data', async (t) => {
    const sim = await startSimulator(t);
    const { client } = clientFor(t, sim);

    const profile = await client.profile();
    const categories = await client.categories();
    const products = await client.products();
    const mlbb = await client.products({ categoryCode: 'MLBB' });
    const input = orderInput();
    const created = await client.createOrder(input);
    const byRef = await client.getOrder(created.partner_ref);
    const byInvoice = await client.getOrder(created.invoice_number);

    assert.deepEqual(profile, {
      member_id: 'M-0001',
      member_name: sim.member.member_name,
      member_role: sim.member.member_role,
      member_balance: sim.member.balance,
    });
    assert.ok(categories.some((c) => c.code === 'MLBB' && typeof c.is_active === 'boolean'));
    assert.ok(products.length > mlbb.length && mlbb.length > 0);
    assert.ok(mlbb.every((p) => p.category_code === 'MLBB' && typeof p.price === 'number'));
    assert.equal(created.partner_ref, input.partner_ref);
    assert.equal(created.status, 'PENDING');
    assert.equal(created.product_code, 'MLBB-86');
    assert.equal(created.amount, mlbb.find((p) => p.code === 'MLBB-86')?.price);
    assert.deepEqual(byRef, created);
    assert.deepEqual(byInvoice, created);
  });

  test('Authorization: Bearer authenticates as x-api-key does', async (t) => {
    const sim = await startSimulator(t);
    const { client: bearer } = clientFor(t, sim, { authStyle: 'bearer' });
    const { client: header } = clientFor(t, sim, { authStyle: 'x-api-key' });

    assert.deepEqual(await bearer.profile(), await header.profile());
  });

  test('refs with a slash, a space and non-ASCII characters round-trip through getOrder', async (t) => {
    const sim = await startSimulator(t);
    const { client } = clientFor(t, sim);

    for (const ref of [`a/b c?d#e%-${uniqueRef()}`, `pedido-ñ-日本-${uniqueRef()}`]) {
      const created = await client.createOrder(orderInput({ partner_ref: ref }));
      const read = await client.getOrder(ref);
      assert.equal(created.partner_ref, ref);
      assert.equal(read.partner_ref, ref);
      assert.equal(read.invoice_number, created.invoice_number);
    }
  });

  test('a wrong key is INVALID_API_KEY, not retryable, and sent once', async (t) => {
    const sim = await startSimulator(t);
    const { client, attempts } = clientFor(t, sim, { apiKey: sim.keyOf(DEMO_MEMBERS.noH2h) });

    await assert.rejects(client.profile(), (error: unknown) => {
      assert.ok(error instanceof UpstreamError);
      assert.equal(error.status, 401);
      assert.equal(error.code, 'INVALID_API_KEY');
      assert.equal(error.retryable, false);
      assert.equal(error.attempts, 1);
      assert.match(error.message, /check the API key/);
      return true;
    });
    assert.equal(attempts().length, 1);
  });

  test('IP_NOT_WHITELISTED names the IP to add, is not retried and draws one budget slot', async (t) => {
    const sim = await startSimulator(t);
    const apiKey = sim.keyOf(DEMO_MEMBERS.remote);
    const budget = await budgetFor(t, apiKey);
    const { client, attempts } = clientFor(t, sim, { apiKey, budget });

    await assert.rejects(client.profile(), (error: unknown) => {
      assert.ok(error instanceof UpstreamError);
      assert.equal(error.code, 'IP_NOT_WHITELISTED');
      assert.equal(error.detail, '127.0.0.1');
      assert.equal(error.fix, "add 127.0.0.1 to the member's whitelist");
      assert.match(error.message, /add 127\.0\.0\.1 to the member's whitelist/);
      assert.equal(error.retryable, false);
      return true;
    });
    assert.equal(attempts().length, 1);
    assert.equal((await budget.used()).used, 1);
  });

  test('INVALID_TARGET and INSUFFICIENT_BALANCE are not retried and say what to fix', async (t) => {
    const sim = await startSimulator(t);
    const { client, attempts } = clientFor(t, sim);
    const { client: poor, attempts: poorAttempts } = clientFor(t, sim, {
      apiKey: sim.keyOf(DEMO_MEMBERS.lowBalance),
    });

    await assert.rejects(
      client.createOrder(orderInput({ data: { user_id: 'abc', server_id: '2001' } })),
      (error: unknown) =>
        error instanceof UpstreamError &&
        error.status === 400 &&
        error.code === 'INVALID_TARGET' &&
        error.detail.startsWith('data.user_id') &&
        !error.retryable &&
        !error.outcomeUnknown,
    );
    await assert.rejects(
      poor.createOrder(orderInput()),
      (error: unknown) =>
        error instanceof UpstreamError &&
        error.code === 'INSUFFICIENT_BALANCE' &&
        error.fix === 'top up the balance, then create a new order' &&
        !error.retryable,
    );
    assert.equal(attempts().length, 1);
    assert.equal(poorAttempts().length, 1);
    assert.deepEqual(await sim.allOrders(), []);
  });

  test('an unknown ref is ORDER_NOT_FOUND and not retried', async (t) => {
    const sim = await startSimulator(t);
    const { client, attempts } = clientFor(t, sim);

    await assert.rejects(
      client.getOrder('no-such-ref'),
      (error: unknown) =>
        error instanceof UpstreamError && error.status === 404 && error.code === 'ORDER_NOT_FOUND',
    );
    assert.equal(attempts().length, 1);
  });

  test('a 429 is retried after its Retry-After and the call succeeds', async (t) => {
    const sim = await startSimulator(t, { rateLimit: 2, rateWindowMs: 1000 });
    const { client, attempts } = clientFor(t, sim);

    await client.profile();
    await client.profile();
    const started = performance.now();
    const third = await client.profile();

    assert.equal(third.member_id, 'M-0001');
    const lines = attempts();
    assert.deepEqual(
      lines.map((l) => [l.status, l.attempt]),
      [
        [200, 1],
        [200, 1],
        [429, 1],
        [200, 2],
      ],
    );
    assert.equal(lines[2]?.code, 'TOO_MANY_REQUESTS');
    assert.ok((lines[2]?.retryInMs ?? 0) >= 1000, 'waited out Retry-After: 1');
    assert.ok(performance.now() - started >= 1000);
  });

  // Waiting out the 60 s Retry-After would run into this test's timeout.
  test('a 429 whose Retry-After exceeds maxRetryAfterMs is surfaced at once with retryAfterMs', {
    timeout: 20_000,
  }, async (t) => {
    const sim = await startSimulator(t, { rateLimit: 1, rateWindowMs: 60_000 });
    const { client, attempts } = clientFor(t, sim, { retry: { maxRetryAfterMs: 5_000 } });
    await client.profile();

    await assert.rejects(client.profile(), (error: unknown) => {
      assert.ok(error instanceof UpstreamError);
      assert.equal(error.status, 429);
      assert.equal(error.code, 'TOO_MANY_REQUESTS');
      assert.equal(error.retryable, true);
      assert.ok((error.retryAfterMs ?? 0) > 55_000, String(error.retryAfterMs));
      return true;
    });
    assert.equal(attempts().length, 2);
  });

  test('a GET answered 503 every time is retried maxAttempts times, each attempt drawing from the budget', async (t) => {
    const sim = await startSimulator(t);
    const budget = await budgetFor(t, sim.member.api_key);
    const { client, attempts } = clientFor(t, sim, { budget, retry: { maxAttempts: 3, baseDelayMs: 5 } });
    await sim.setFaults({ error_5xx: 1 });

    await assert.rejects(client.categories(), (error: unknown) => {
      assert.ok(error instanceof UpstreamError);
      assert.equal(error.status, 503);
      assert.equal(error.code, 'SERVICE_UNAVAILABLE');
      assert.equal(error.retryable, true);
      assert.equal(error.attempts, 3);
      assert.match(error.message, /after 3 attempts/);
      return true;
    });
    assert.deepEqual(
      attempts().map((l) => [l.status, l.attempt]),
      [
        [503, 1],
        [503, 2],
        [503, 3],
      ],
    );
    assert.equal((await budget.used()).used, 3);
  });

  test('createOrder timing out on every attempt is UpstreamUnreachableError, and the upstream has one order, debited once', async (t) => {
    const sim = await startSimulator(t);
    const { client, attempts } = clientFor(t, sim, {
      headersTimeoutMs: 200,
      retry: { maxAttempts: 3, baseDelayMs: 5 },
    });
    const before = await sim.balance();
    // undici checks header timeouts on a coarse (0.5 to 1 s) timer: the answer must come well after.
    await sim.setFaults({ create_response_delay_ms: 3_000 });
    const input = orderInput();

    await assert.rejects(client.createOrder(input), (error: unknown) => {
      assert.ok(error instanceof UpstreamUnreachableError);
      assert.equal(error.code, 'TIMEOUT');
      assert.equal(error.outcomeUnknown, true);
      assert.equal(error.attempts, 3);
      assert.match(error.message, /outcome is unknown, not failed/);
      assert.match(error.message, /same partner_ref/);
      return true;
    });

    assert.deepEqual(
      attempts().map((l) => [l.status, l.attempt]),
      [
        ['TIMEOUT', 1],
        ['TIMEOUT', 2],
        ['TIMEOUT', 3],
      ],
    );
    const orders = (await sim.allOrders()).filter((o) => o.partner_ref === input.partner_ref);
    assert.equal(orders.length, 1);
    assert.equal(await sim.balance(), before - orders[0]!.amount);
  });

  test('a dropped answer to createOrder is repeated with the same partner_ref and ends with the one order', async (t) => {
    const sim = await startSimulator(t);
    // A budget of one call per 1.5 s holds the retry back until the drop fault is off again.
    const budget = await budgetFor(t, sim.member.api_key, { limit: 1, windowMs: 1_500, marginMs: 0 });
    const { client, attempts } = clientFor(t, sim, { budget });
    const before = await sim.balance();
    await sim.setFaults({ create_drop_response: 1 });
    const input = orderInput();

    const placing = client.createOrder(input);
    await waitFor(async () => (await sim.allOrders()).some((o) => o.partner_ref === input.partner_ref), {
      message: 'the first attempt to commit the order',
    });
    await sim.setFaults({ create_drop_response: 0 });
    const order = await placing;

    assert.equal(order.partner_ref, input.partner_ref);
    assert.deepEqual(
      attempts().map((l) => [l.status, l.attempt]),
      [
        ['NETWORK_ERROR', 1],
        [200, 2],
      ],
    );
    const upstream = (await sim.allOrders()).filter((o) => o.partner_ref === input.partner_ref);
    assert.equal(upstream.length, 1);
    assert.equal(upstream[0]!.invoice_number, order.invoice_number);
    assert.equal(await sim.balance(), before - order.amount);
  });

  test('createOrder without a partner_ref is refused before any call', async (t) => {
    const sim = await startSimulator(t);
    const { client, attempts } = clientFor(t, sim);
    const { partner_ref: _, ...withoutRef } = orderInput();

    await assert.rejects(
      client.createOrder(withoutRef),
      (error: unknown) =>
        error instanceof OrderInputError &&
        error.code === 'PARTNER_REF_REQUIRED' &&
        /rule 7/.test(error.message),
    );
    await assert.rejects(
      client.createOrder(orderInput({ partner_ref: 'x'.repeat(65) })),
      (error: unknown) => error instanceof OrderInputError && error.code === 'PARTNER_REF_TOO_LONG',
    );
    assert.equal(attempts().length, 0);
  });

  test('getOrder is a poll: with the poll share spent it throws BudgetExhaustedError without a call; with create priority it goes', async (t) => {
    const sim = await startSimulator(t);
    const budget = await budgetFor(t, sim.member.api_key, {
      limit: 3,
      reservedForCreate: 1,
      windowMs: 60_000,
    });
    const { client, attempts } = clientFor(t, sim, { budget });
    const order = await client.createOrder(orderInput());
    await client.getOrder(order.partner_ref);

    await assert.rejects(client.getOrder(order.partner_ref), (error: unknown) => {
      assert.ok(error instanceof BudgetExhaustedError);
      assert.equal(error.priority, 'poll');
      return true;
    });
    const readBack = await client.getOrder(order.partner_ref, { priority: 'create' });

    assert.equal(readBack.invoice_number, order.invoice_number);
    assert.equal(attempts().length, 3);
    const usage = await budget.used();
    assert.deepEqual([usage.used, usage.create, usage.poll], [3, 2, 1]);
  });

  test('the debug log has method, path, status, attempt and duration, and never the API key', async (t) => {
    const sim = await startSimulator(t);
    const { client, raw, attempts } = clientFor(t, sim, { authStyle: 'bearer' });

    await client.products({ categoryCode: 'FF' });

    const [line] = attempts();
    assert.equal(line?.method, 'GET');
    assert.equal(line?.path, '/v1/member-api/products?category_code=FF');
    assert.equal(line?.status, 200);
    assert.equal(line?.attempt, 1);
    assert.equal(typeof line?.durationMs, 'number');
    assert.ok(!raw.join('').includes(sim.member.api_key));
  });
});
