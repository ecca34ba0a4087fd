import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { RateBudget } from '../../src/rate-budget/rate-budget.js';
import { UpstreamCircuit } from '../../src/store/upstream-circuit.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import { runCli } from '../helpers/cli.js';
import { privateRedis } from '../helpers/redis.js';
import { tempStore } from '../helpers/store.js';
import { twoSimulatedUpstreams } from '../helpers/upstreams.js';

test('upstreams lists each configured upstream with its circuit, balance, catalog age and budget use; --json in snake_case', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'h2h-upstreams-cli-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const upstreamsFile = join(dir, 'upstreams.json');
  writeFileSync(
    upstreamsFile,
    JSON.stringify({
      upstreams: [{ name: 'default' }, { name: 'beta', base_url: 'http://127.0.0.1:1/v1/member-api' }],
    }),
  );
  const { store, path } = await tempStore(t, { now: Date.now });
  const syncedAt = Date.now() - 120_000;
  await store.catalog.applySync({
    ...catalogSnapshot({ readAt: syncedAt, balance: 100_000 }),
    upstream: 'default',
  });
  await store.catalog.applySync({
    ...catalogSnapshot({ readAt: syncedAt, balance: 30_000 }),
    upstream: 'beta',
  });
  await new UpstreamCircuit(store.context, 'beta').open('unauthorized', {
    code: 'INVALID_API_KEY',
    message: '401',
    fix: 'check H2H_UPSTREAM_BETA_API_KEY',
  });
  const redis = await privateRedis(t);
  const connection = new Redis(redis.url);
  t.after(() => connection.quit());
  await new RateBudget({ redis: connection, apiKey: 'key-b' }).acquire('poll');
  const env = {
    H2H_DB_PATH: path,
    REDIS_URL: redis.url,
    H2H_UPSTREAMS_FILE: upstreamsFile,
    H2H_BASE_URL: 'http://127.0.0.1:1/v1/member-api',
    H2H_API_KEY: 'key-a',
    H2H_UPSTREAM_BETA_API_KEY: 'key-b',
  };

  const json = await runCli(['upstreams', '--json'], env);
  assert.equal(json.code, 0, json.stderr);
  const views = JSON.parse(json.stdout) as {
    name: string;
    circuit: { code: string } | null;
    balance: { balance: number };
    catalog_synced_at: string;
    catalog_age_s: number;
    budget: { used: number };
  }[];
  assert.deepEqual(
    views.map((v) => [
      v.name,
      v.circuit?.code ?? null,
      v.balance.balance,
      v.catalog_synced_at,
      v.budget.used,
    ]),
    [
      ['default', null, 100_000, new Date(syncedAt).toISOString(), 0],
      ['beta', 'INVALID_API_KEY', 30_000, new Date(syncedAt).toISOString(), 1],
    ],
  );
  assert.ok(views[1]!.catalog_age_s >= 120, `${views[1]!.catalog_age_s} s`);

  const table = await runCli(['upstreams'], env);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /│ default +│ closed +│ 100,000 +│ 0 +│ \d+ min \d+ s ago +│ 0\/60 +│/);
  assert.match(
    table.stdout,
    /│ beta +│ OPEN \(unauthorized\) INVALID_API_KEY +│ 30,000 +│ 0 +│ \d+ min \d+ s ago +│ 1\/60 +│/,
  );
  assert.match(table.stdout, /^beta: INVALID_API_KEY: check H2H_UPSTREAM_BETA_API_KEY$/m);
});

test('catalog sync --upstream NAME refreshes that upstream’s catalog and balance with its own client; an unknown name exits 2 naming the known ones', async (t) => {
  const upstreams = await twoSimulatedUpstreams(t);
  const redis = await privateRedis(t);
  const { store, path } = await tempStore(t, { now: Date.now });
  const env = { H2H_DB_PATH: path, REDIS_URL: redis.url, ...upstreams.env };

  const synced = await runCli(['catalog', 'sync', '--upstream', 'beta', '--json'], env);
  assert.equal(synced.code, 0, synced.stderr);
  assert.equal(JSON.parse(synced.stdout).upstream, 'beta');
  assert.notEqual(await store.catalog.syncedAt('beta'), null);
  assert.equal(await store.catalog.syncedAt('default'), null, "the default's catalog is untouched");
  assert.equal((await store.balance.viewOf('beta')).profile_balance, 150_000);
  const answered = (log: typeof upstreams.logs.beta) =>
    [...log.statuses().values()].reduce((a, b) => a + b, 0);
  assert.ok(answered(upstreams.logs.beta) >= 3, "beta's simulator answered the sync's calls");
  assert.equal(answered(upstreams.logs.default), 0, 'the default upstream was not called');

  const unknown = await runCli(['catalog', 'sync', '--upstream', 'gamma'], env);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /gamma.*default.*beta|gamma.*beta.*default/);
});
