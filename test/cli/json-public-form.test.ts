import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StatusReport } from '../../src/cli/commands/status-actions.js';
import type { PublicJson } from '../../src/cli/public-json.js';
import type { ApiToken } from '../../src/store/api-tokens.js';
import { runCli } from '../helpers/cli.js';
import { ISO_UTC, publicFormBreaches } from '../helpers/public-json.js';
import { privateRedis } from '../helpers/redis.js';
import { snapshot, tempStore } from '../helpers/store.js';

const iso = (ms: number) => new Date(ms).toISOString();

test('status --json prints only snake_case keys and ISO 8601 UTC times, with every part of the report filled', async (t) => {
  const redis = await privateRedis(t);
  const { store, path } = await tempStore(t, { now: Date.now });
  const endpoint = await store.endpoints.add({
    url: 'https://shop.example/hooks',
    events: ['order.*'],
    secret: 'whsec_x',
  });
  await store.writer.createLocalOrder({
    partnerRef: 'open-1',
    productCode: 'ML86',
    data: { user_id: '12345678', server_id: '2001' },
  });
  await store.writer.applyOrderSnapshot(snapshot('open-1', 'PENDING'), { source: 'create' });
  const circuit = await store.circuit.probeFailed('unauthorized', {
    code: 'INVALID_API_KEY',
    message: 'the key was refused',
    fix: 'check the API key (H2H_API_KEY)',
  });
  const localCreatedAt = (await store.queries.getOrder('open-1'))!.localCreatedAt;

  const run = await runCli(['status', '--json'], {
    H2H_DB_PATH: path,
    REDIS_URL: redis.url,
    H2H_BASE_URL: 'http://127.0.0.1:1/v1/member-api',
    H2H_API_KEY: 'sim_key_M0001',
  });

  assert.equal(run.code, 0, run.stderr);
  const report = JSON.parse(run.stdout) as PublicJson<StatusReport>;
  assert.deepEqual(publicFormBreaches(report), []);
  assert.equal(report.orders.oldest_open_local_created_at, iso(localCreatedAt));
  assert.equal(typeof report.orders.oldest_open_age_s, 'number');
  assert.deepEqual(
    [report.circuit?.opened_at, report.circuit?.probed_at],
    [iso(circuit.openedAt), iso(circuit.probedAt!)],
  );
  assert.deepEqual(Object.keys(report.queues ?? {}), ['webhooks', 'reconcile', 'poll_requests']);
  assert.equal(report.failed_events, 0);
  assert.equal(typeof report.budget?.window_ms, 'number');
  assert.equal(typeof report.budget?.polls_waiting, 'boolean');
  assert.equal(report.notifications[0]?.endpoint_id, endpoint.id);
  assert.equal(typeof report.notifications[0]?.oldest_pending_age_s, 'number', 'the order’s events wait');
  assert.deepEqual(report.first_poll, {
    learned: false,
    delay_s: 30,
    reason: 'fewer than 50 final webhooks known yet (RECONCILE_PACE_MIN_SAMPLES)',
  });
});

test('tokens list --json prints only snake_case keys and ISO 8601 UTC times, never a secret', async (t) => {
  const { store, path } = await tempStore(t, { now: Date.now });
  const used = await store.tokens.create('web shop', ['orders:read']);
  assert.equal((await store.tokens.authenticate(used.token)).ok, true);
  const revoked = await store.tokens.create('old till', ['orders:write']);
  await store.tokens.revoke(revoked.info.id);
  const stored = await store.tokens.list();

  const run = await runCli(['tokens', 'list', '--json'], { H2H_DB_PATH: path });

  assert.equal(run.code, 0, run.stderr);
  const listed = JSON.parse(run.stdout) as PublicJson<ApiToken>[];
  assert.deepEqual(publicFormBreaches(listed), []);
  const isoOrNull = (ms: number | null) => (ms === null ? null : iso(ms));
  assert.deepEqual(
    listed,
    stored.map((token) => ({
      id: token.id,
      name: token.name,
      scopes: token.scopes,
      created_at: iso(token.createdAt),
      last_used_at: isoOrNull(token.lastUsedAt),
      revoked_at: isoOrNull(token.revokedAt),
    })),
  );
  assert.match(listed[0]!.last_used_at ?? '', ISO_UTC);
  assert.match(listed[1]!.revoked_at ?? '', ISO_UTC);
});
