import assert from 'node:assert/strict';
import { test } from 'node:test';
import { catalogSnapshot } from '../helpers/catalog.js';
import { runCli } from '../helpers/cli.js';
import { publicFormBreaches } from '../helpers/public-json.js';
import { privateRedis } from '../helpers/redis.js';
import { tempStore } from '../helpers/store.js';

test('status and upstreams show each upstream’s balance drift; catalog accept-drift takes it as known', async (t) => {
  const redis = await privateRedis(t);
  const { store, path, clock } = await tempStore(t, { balanceDriftThreshold: 5_000 });
  const read = (balance: number) => {
    clock.advance(900_000);
    return store.catalog.applySync(catalogSnapshot({ readAt: clock.now(), balance }));
  };
  await read(1_000_000);
  await read(1_015_000); // 15,000 came back that no order explains (a top-up, say)
  const cli = (args: string[]) =>
    runCli(args, { REDIS_URL: redis.url, H2H_DB_PATH: path, BALANCE_DRIFT_THRESHOLD: '5000' });

  const json = await cli(['status', '--json']);
  assert.equal(json.code, 0, json.stderr);
  const report = JSON.parse(json.stdout);
  assert.deepEqual(publicFormBreaches(report), []);
  const drift = report.upstreams[0].balance_drift;
  assert.deepEqual(
    [drift.drift, drift.expected_balance, drift.profile_balance, drift.audit_steered, drift.threshold],
    [15_000, 1_000_000, 1_015_000, true, 5_000],
  );
  const human = await cli(['status']);
  assert.match(
    human.stdout,
    /Balance drift: \+15,000 at .* \(profile 1,015,000, expected 1,000,000\); unexplained \+15,000 since .*; the audit reads its most recent SUCCESS orders first/,
  );
  const listed = await cli(['upstreams', '--json']);
  assert.equal(JSON.parse(listed.stdout)[0].drift.drift, 15_000);
  assert.match((await cli(['upstreams'])).stdout, /\+15,000 since .* \(audit steered\)/);

  const unknown = await cli(['catalog', 'accept-drift', '--upstream', 'nope']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /no upstream is named "nope": the configured ones are default/);
  const accepted = await cli(['catalog', 'accept-drift']);
  assert.equal(accepted.code, 0, accepted.stderr);
  assert.match(accepted.stdout, /accepted a drift of \+15,000 on default/);
  const after = (await store.balance.driftOf('default'))!;
  assert.deepEqual(
    [after.drift, after.expected_balance, after.drift_since, after.audit_steered],
    [0, 1_015_000, null, false],
  );
  await read(1_015_000);
  assert.equal(
    (await store.balance.driftOf('default'))!.drift,
    0,
    'the next read expects the accepted balance',
  );
});
