import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TARGET_NOT_PUBLISHED } from '../../src/cli/commands/catalog-actions.js';
import { runCli } from '../helpers/cli.js';
import { privateRedis } from '../helpers/redis.js';
import { demoFixture, fixtureProduct, startSimulator } from '../helpers/simulator.js';

test('products shows the target format the simulator publishes, and says when none is published', async (t) => {
  const fixture = demoFixture();
  fixtureProduct(fixture, 'FF-355').target = {}; // a product the upstream publishes no format for
  const sim = await startSimulator(t, { fixture });
  const redis = await privateRedis(t);
  const env = { H2H_BASE_URL: sim.sim.baseUrl, H2H_API_KEY: sim.member.api_key, REDIS_URL: redis.url };

  const json = await runCli(['products', '--category', 'FF', '--json'], env);
  assert.equal(json.code, 0, json.stderr);
  assert.deepEqual(
    (JSON.parse(json.stdout) as Array<{ code: string; target: unknown }>).map(({ code, target }) => ({
      code,
      target,
    })),
    [
      { code: 'FF-70', target: fixtureProduct(fixture, 'FF-70').target },
      { code: 'FF-355', target: null },
    ],
  );

  const table = await runCli(['products', '--category', 'GI'], env);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /│ Target +│/);
  assert.match(
    table.stdout,
    /│ GI-60 +│.*│ user_id \^\[0-9\]\{9,10\}\$, server_id \^\(os_asia\|os_euro\|os_usa\|os_cht\)\$ +│/,
  );

  const unpublished = await runCli(['products', '--category', 'FF'], env);
  assert.match(unpublished.stdout, new RegExp(`│ FF-355 +│.*│ ${TARGET_NOT_PUBLISHED} +│`));
  assert.match(unpublished.stdout, /│ FF-70 +│.*│ user_id \^\[0-9\]\{8,12\}\$ +│/);
});
