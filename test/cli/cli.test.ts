import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { runCli } from '../helpers/cli.js';
import { privateRedis } from '../helpers/redis.js';
import { startSimulator, userIdEndingIn } from '../helpers/simulator.js';

async function environment(t: TestContext) {
  const sim = await startSimulator(t);
  const redis = await privateRedis(t);
  const dir = mkdtempSync(join(tmpdir(), 'h2h-cli-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const env = {
    H2H_BASE_URL: sim.sim.baseUrl,
    H2H_API_KEY: sim.member.api_key,
    REDIS_URL: redis.url,
    H2H_DB_PATH: join(dir, 'h2h.db'),
  };
  return { sim, env };
}

test('profile, categories and products print what the upstream says, as tables or --json', async (t) => {
  const { sim, env } = await environment(t);
  const profile = await runCli(['profile', '--json'], env);
  assert.equal(profile.code, 0, profile.stderr);
  assert.deepEqual(JSON.parse(profile.stdout), (await sim.api('/profile')).body);

  const products = await runCli(['products', '--category', 'FF', '--json'], env);
  assert.deepEqual(
    JSON.parse(products.stdout).map((p: { code: string }) => p.code),
    ['FF-70', 'FF-355'],
  );
  const table = await runCli(['categories'], env);
  assert.match(table.stdout, /│ MLBB +│ Mobile Legends/);
});

test('order create places one order, order show lists its history, order list filters by status', async (t) => {
  const { sim, env } = await environment(t);
  const args = [
    'order',
    'create',
    '--product',
    'MLBB-86',
    '--user-id',
    userIdEndingIn('0007'),
    '--server-id',
    '2001',
  ];
  const created = await runCli([...args, '--partner-ref', 'cli-1', '--json'], env);
  assert.equal(created.code, 0, created.stderr);
  const result = JSON.parse(created.stdout);
  assert.equal(result.outcome, 'accepted');
  assert.equal(result.order.status, 'PENDING');

  const again = await runCli([...args, '--partner-ref', 'cli-1', '--json'], env);
  assert.equal(JSON.parse(again.stdout).order.invoice_number, result.order.invoice_number);
  assert.equal((await sim.allOrders()).length, 1);
  const otherProduct = args.map((arg) => (arg === 'MLBB-86' ? 'MLBB-172' : arg));
  const conflict = await runCli([...otherProduct, '--partner-ref', 'cli-1'], env);
  assert.equal(conflict.code, 1);
  assert.match(
    conflict.stderr,
    /cli-1 already names an order with another product or data: use a new partner_ref/,
  );

  // A ref the upstream already has for another order (a store restored from an old backup).
  assert.equal(
    (await sim.createOrder({ partner_ref: 'cli-old', product_code: 'FF-70', data: { user_id: '99990001' } }))
      .status,
    201,
  );
  const reused = await runCli([...args, '--partner-ref', 'cli-old'], env);
  assert.equal(reused.code, 1);
  assert.match(
    reused.stderr,
    /rejected: PARTNER_REF_REUSED \(.*another order under partner_ref cli-old.*\) — place the order again with a new partner_ref/,
  );
  assert.equal((await sim.allOrders()).length, 2, 'nothing more was placed');

  const shown = await runCli(['order', 'show', result.order.invoice_number, '--json'], env);
  assert.equal(JSON.parse(shown.stdout).order.partner_ref, 'cli-1');
  assert.equal(JSON.parse(shown.stdout).events.length, 1);
  // The public representation (docs/api.md), as the shop API and the feed carry it.
  const { order: shownOrder, events: shownEvents } = JSON.parse(shown.stdout);
  assert.equal(shownOrder.submission, 'accepted');
  assert.equal(shownOrder.version, 1);
  assert.match(shownOrder.local_created_at, /^\d{4}-\d\d-\d\dT/);
  assert.deepEqual([shownEvents[0].source, shownEvents[0].reason], ['create', 'initial']);

  const pending = await runCli(['order', 'list', '--status', 'PENDING', '--json'], env);
  const success = await runCli(['order', 'list', '--status', 'SUCCESS', '--json'], env);
  assert.deepEqual([JSON.parse(pending.stdout).length, JSON.parse(success.stdout).length], [1, 0]);
});

test('an upstream refusal prints one line with its code and the fix: exit 2 when it is our configuration, 1 when it is the order', async (t) => {
  const { env } = await environment(t);
  const refused = await runCli(['profile'], { ...env, H2H_API_KEY: 'sim_key_remote_M0002' });
  assert.equal(refused.code, 2);
  assert.equal(
    refused.stderr.trim(),
    "error: IP_NOT_WHITELISTED (401): 127.0.0.1 — add 127.0.0.1 to the member's whitelist",
  );

  const rejected = await runCli(
    ['order', 'create', '--product', 'MLBB-86', '--user-id', userIdEndingIn('0000'), '--server-id', '2001'],
    env,
  );
  assert.equal(rejected.code, 1);
  assert.match(rejected.stderr, /rejected: INVALID_TARGET/);
});

test('order create with a refused key blocks the order (exit 2, the fix, submitted again once fixed), status shows it; a wrong base URL exits 2 naming H2H_BASE_URL', async (t) => {
  const { sim, env } = await environment(t);
  const target = ['--user-id', userIdEndingIn('0007'), '--server-id', '2001'];
  const args = ['order', 'create', '--product', 'MLBB-86', ...target];
  await sim.patchMember('M-0001', { h2h_enabled: false });

  const blocked = await runCli([...args, '--partner-ref', 'cli-blocked'], env);
  assert.equal(blocked.code, 2);
  assert.match(
    blocked.stderr,
    /blocked: the upstream refused our configuration, not the order: INVALID_API_KEY/,
  );
  assert.match(blocked.stderr, /H2H_API_KEY/);
  assert.match(blocked.stderr, /submitted again with the same partner_ref once the configuration is fixed/);
  assert.match(blocked.stdout, /blocked: INVALID_API_KEY/);

  const status = await runCli(['status'], env);
  assert.match(status.stdout, /│ submission blocked +│ 1 +│/);
  assert.match(
    status.stdout,
    /1 blocked order\(s\): the upstream refused our configuration \(INVALID_API_KEY\) — check the API key \(H2H_API_KEY\)/,
  );
  const json = JSON.parse((await runCli(['status', '--json'], env)).stdout);
  assert.deepEqual([json.blocked.count, json.blocked.code], [1, 'INVALID_API_KEY']);

  await sim.patchMember('M-0001', { h2h_enabled: true });
  const again = await runCli([...args, '--partner-ref', 'cli-blocked', '--json'], env);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(JSON.parse(again.stdout).outcome, 'accepted');

  const wrongUrl = await runCli([...args, '--partner-ref', 'cli-url'], {
    ...env,
    H2H_BASE_URL: `${sim.sim.origin}/v2/member-api`,
  });
  assert.equal(wrongUrl.code, 2);
  assert.match(wrongUrl.stderr, /not submitted: .*check H2H_BASE_URL/);
});

test('missing or wrong settings stop the command with exit 2 and name the variable to fix', async (t) => {
  const { env } = await environment(t);
  const missing = await runCli(['profile'], { REDIS_URL: env.REDIS_URL });
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /H2H_BASE_URL and H2H_API_KEY must be set/);

  const noRedis = await runCli(['profile', '--json'], { ...env, REDIS_URL: 'redis://127.0.0.1:1' });
  assert.equal(noRedis.code, 2);
  assert.equal(JSON.parse(noRedis.stdout).error.code, 'CONFIG_INVALID');
  assert.match(JSON.parse(noRedis.stdout).error.message, /REDIS_URL=redis:\/\/127\.0\.0\.1:1/);
});
