import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { BudgetExhaustedError } from '../../src/rate-budget/rate-budget.js';
import { createUpstream, upstreamAccount } from '../../src/upstream/create-upstream.js';
import { UpstreamError } from '../../src/upstream/errors.js';
import { privateRedis } from '../helpers/redis.js';
import { startSimulator } from '../helpers/simulator.js';
import { twoSimulatedUpstreams } from '../helpers/upstreams.js';
import { waitFor } from '../helpers/wait.js';

test('createUpstream gives a client that draws every call from the configured shared budget; close releases its Redis', async (t) => {
  const redis = await privateRedis(t);
  const sim = await startSimulator(t);
  const config = loadConfig({
    REDIS_URL: redis.url,
    H2H_BASE_URL: sim.sim.baseUrl,
    H2H_API_KEY: sim.member.api_key,
    H2H_RATE_LIMIT: '30',
  });
  const upstream = await createUpstream(config);
  t.after(() => upstream.close());
  const admin = new Redis(redis.url);
  t.after(() => admin.disconnect());

  await upstream.client.profile();
  await upstream.client.categories();

  const usage = await upstream.budget.used();
  assert.equal(usage.create, 2);
  assert.equal(usage.limit, 30);
  const budgetConnections = async () =>
    String(await admin.call('CLIENT', 'LIST')).match(/ name=h2h-budget /g)?.length ?? 0;
  assert.equal(await budgetConnections(), 1);

  await upstream.close();
  await upstream.close();
  await waitFor(async () => (await budgetConnections()) === 0, { message: 'the budget connection closed' });
});

test('createUpstream names REDIS_URL when Redis does not answer, and the upstream settings when missing', async () => {
  const unreachable = 'redis://127.0.0.1:1';
  await assert.rejects(
    createUpstream(
      loadConfig({ REDIS_URL: unreachable, H2H_BASE_URL: 'http://127.0.0.1:1', H2H_API_KEY: 'k' }),
    ),
    (error: unknown) =>
      error instanceof ConfigError &&
      error.message.includes(`cannot reach Redis at REDIS_URL=${unreachable}`) &&
      error.message.includes('start Redis or set REDIS_URL'),
  );
  await assert.rejects(
    createUpstream(loadConfig({ REDIS_URL: unreachable })),
    (error: unknown) => error instanceof ConfigError && /H2H_BASE_URL and H2H_API_KEY/.test(error.message),
  );
});

test("each upstream account has its own client and rate budget: spending beta's leaves the default's untouched", async (t) => {
  const redis = await privateRedis(t);
  const upstreams = await twoSimulatedUpstreams(t, { betaRateLimit: 3 });
  const config = loadConfig({ REDIS_URL: redis.url, ...upstreams.env });
  const [defaultAccount, betaAccount] = config.upstreams;
  const main = await createUpstream(config, defaultAccount);
  t.after(() => main.close());
  const beta = await createUpstream(config, betaAccount);
  t.after(() => beta.close());

  for (let i = 0; i < 3; i += 1) await beta.client.profile(); // beta's whole window
  const betaPoll = beta.client.getOrder('any-ref');
  const defaultPoll = main.client.getOrder('any-ref');

  await assert.rejects(betaPoll, BudgetExhaustedError, "beta's poll finds beta's budget spent");
  await assert.rejects(
    defaultPoll,
    (error: unknown) => error instanceof UpstreamError && error.status === 404,
    "the default's poll gets a slot at once and reaches the default upstream",
  );
  assert.notEqual(beta.budget.key, main.budget.key, 'separate keys in Redis');
  assert.deepEqual(
    [(await main.budget.used()).used, (await main.budget.used()).limit],
    [1, 60],
    "the default's window holds its own call only, under H2H_RATE_LIMIT",
  );
  assert.deepEqual([(await beta.budget.used()).used, (await beta.budget.used()).limit], [3, 3]);
  assert.equal(upstreams.logs.beta.gets().length, 0, 'beta was not asked for the order');
  assert.deepEqual(upstreams.logs.default.gets(), ['any-ref']);
});

test('an upstream account without its key is refused, naming its variable; an unknown name names the known ones', async (t) => {
  const upstreams = await twoSimulatedUpstreams(t);
  const config = loadConfig({ ...upstreams.env, H2H_UPSTREAM_BETA_API_KEY: '' });
  await assert.rejects(
    createUpstream(config, upstreamAccount(config, 'beta')),
    (error: unknown) =>
      error instanceof ConfigError &&
      /upstream "beta": H2H_UPSTREAM_BETA_API_KEY must be set/.test(error.message),
  );
  assert.throws(
    () => upstreamAccount(config, 'gamma'),
    (error: unknown) =>
      error instanceof ConfigError &&
      /no upstream is named "gamma": the configured ones are default, beta/.test(error.message),
  );
});
