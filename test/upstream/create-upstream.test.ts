import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { createUpstream } from '../../src/upstream/create-upstream.js';
import { privateRedis } from '../helpers/redis.js';
import { startSimulator } from '../helpers/simulator.js';
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
