import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import { request } from 'undici';
import { runCli, spawnCli } from '../helpers/cli.js';
import { ISO_UTC } from '../helpers/public-json.js';
import { snapshot, tempDbPath, tempStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';

test('tokens create prints the token once; list never shows a secret; revoke refuses it; a bad scope exits 2', async (t) => {
  const dbPath = tempDbPath(t);
  const env = { H2H_DB_PATH: dbPath };
  const created = await runCli(
    ['tokens', 'create', '--name', 'web shop', '--scope', 'orders:read,orders:write', '--json'],
    env,
  );
  assert.equal(created.code, 0, created.stderr);
  const { token, id, scopes, created_at, last_used_at, revoked_at } = JSON.parse(created.stdout);
  assert.match(token, /^h2h_[A-Za-z0-9]{12}_[A-Za-z0-9_-]{43}$/);
  assert.deepEqual(scopes, ['orders:read', 'orders:write']);
  assert.match(created_at, ISO_UTC);
  assert.deepEqual([last_used_at, revoked_at], [null, null]);

  const listed = await runCli(['tokens', 'list'], env);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, new RegExp(`${id}.*web shop.*orders:read orders:write`));
  assert.ok(!listed.stdout.includes(token.slice('h2h_'.length + 12 + 1)), 'no secret in the list');

  assert.equal((await runCli(['tokens', 'revoke', id], env)).code, 0);
  const again = await runCli(['tokens', 'revoke', id, '--json'], env);
  assert.equal(again.code, 1);
  assert.equal(JSON.parse(again.stdout).error.code, 'TOKEN_NOT_FOUND');

  const bad = await runCli(['tokens', 'create', '--name', 'x', '--scope', 'orders:delete'], env);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /scopes must be one or more of orders:write, orders:read; unknown: orders:delete/);
});

/** `h2h-sync api` as pm2 runs it: a child process that logs JSON lines to stdout. */
const spawnApi = (t: TestContext, env: Record<string, string>) =>
  spawnCli(t, ['api'], { LOG_FORMAT: 'json', ...env });

test('h2h-sync api serves the store with a token from the CLI, and stops cleanly on SIGTERM', async (t) => {
  const { store, path } = await tempStore(t, { now: Date.now });
  await store.writer.applyOrderSnapshot(snapshot('SHOP-1', 'SUCCESS', { serial_number: 'SN-1' }), {
    source: 'webhook',
    eventId: 'e1',
  });
  const env = { H2H_DB_PATH: path, API_PORT: '0' };
  const { token } = JSON.parse(
    (await runCli(['tokens', 'create', '--name', 'shop', '--scope', 'orders:read', '--json'], env)).stdout,
  );
  const api = await spawnApi(t, env);
  const listening = await waitFor(
    () => api.jsonLines<{ msg: string; origin: string }>().find((line) => line.msg === 'api listening'),
    { timeoutMs: 20_000, message: `the api to listen; stderr: ${api.stderr()}` },
  );
  const answer = await request(`${listening.origin}/v1/orders/SHOP-1`, {
    headers: { authorization: `Bearer ${token}` },
  });
  assert.equal(answer.statusCode, 200);
  const order = (await answer.body.json()) as { serial_number: string; version: number };
  assert.equal(order.serial_number, 'SN-1');
  assert.equal(order.version, 1);
  api.child.kill('SIGTERM');
  assert.equal(await api.exited, 0);
  assert.match(api.stdout(), /api stopped/);
});
