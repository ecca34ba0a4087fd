import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import {
  apiSettings,
  budgetSettings,
  ConfigError,
  DEFAULT_DB_PATH,
  loadConfig,
  reconcilerSettings,
  settingsTable,
  upstreamSettings,
  webhookUpstreams,
} from '../../src/config/config.js';

test('with no environment every setting has its documented default', () => {
  const config = loadConfig({});
  assert.equal(config.redisUrl, 'redis://127.0.0.1:6380');
  assert.equal(config.dbUrl, `sqlite://${DEFAULT_DB_PATH}`);
  assert.equal(config.dbLockTimeoutMs, 5000);
  assert.deepEqual(budgetSettings(config), {
    limit: 60,
    windowMs: 60_000,
    reservedForCreate: 20,
    pollFloor: 9,
  });
  assert.equal(config.settings.H2H_AUTH_STYLE, 'x-api-key');
});

test('a malformed setting fails at start-up naming the variable and its value', () => {
  assert.throws(
    () => loadConfig({ H2H_RATE_LIMIT: 'sixty', REDIS_URL: 'http://localhost' }),
    (err: unknown) =>
      err instanceof ConfigError &&
      /H2H_RATE_LIMIT="sixty"/.test(err.message) &&
      /REDIS_URL="http:\/\/localhost"/.test(err.message),
  );
});

test('secret values never appear in a configuration error', () => {
  assert.throws(
    () =>
      loadConfig({
        H2H_API_KEY: '',
        H2H_API_SECRET: 'topsecret',
        H2H_BASE_URL: 'ftp://x',
        H2H_AUTH_STYLE: 'basic',
      }),
    (err: unknown) =>
      err instanceof ConfigError && !err.message.includes('topsecret') && /H2H_AUTH_STYLE/.test(err.message),
  );
});

test('commands that call the upstream name the missing URL and key', () => {
  assert.throws(() => upstreamSettings(loadConfig({})), /H2H_BASE_URL and H2H_API_KEY must be set/);
  const upstream = upstreamSettings(
    loadConfig({
      H2H_BASE_URL: 'http://127.0.0.1:4010/v1/member-api',
      H2H_API_KEY: 'k',
      H2H_AUTH_STYLE: 'bearer',
    }),
  );
  assert.equal(upstream.authStyle, 'bearer');
});

test('webhook secrets are a comma-separated list, newest first, and required by the receiver', () => {
  assert.deepEqual(webhookUpstreams(loadConfig({ H2H_API_SECRET: ' new , old ' })), [
    { name: 'default', secrets: ['new', 'old'] },
  ]);
  assert.throws(() => webhookUpstreams(loadConfig({})), /H2H_API_SECRET must be set/);
});

test('a creation reserve that leaves polling nothing is refused', () => {
  assert.throws(
    () => loadConfig({ H2H_RATE_LIMIT: '10', H2H_RATE_RESERVE_CREATE: '10' }),
    /H2H_RATE_RESERVE_CREATE \(10\) must be below H2H_RATE_LIMIT \(10\)/,
  );
});

test('a poll floor that would leave creation nothing is refused, naming both settings', () => {
  assert.throws(
    () => loadConfig({ H2H_RATE_LIMIT: '30', H2H_RATE_POLL_FLOOR: '21' }),
    /H2H_RATE_POLL_FLOOR \(21\) must not exceed H2H_RATE_LIMIT - H2H_RATE_RESERVE_CREATE \(20\)/,
  );
  assert.equal(
    budgetSettings(loadConfig({ H2H_RATE_LIMIT: '40' })).pollFloor,
    6,
    'default: 15 % of the limit',
  );
  assert.equal(budgetSettings(loadConfig({ H2H_RATE_POLL_FLOOR: '0' })).pollFloor, 0);
});

test('without H2H_RATE_RESERVE_CREATE the reserve is the rate budget’s own default, a third of the limit', () => {
  assert.equal(budgetSettings(loadConfig({ H2H_RATE_LIMIT: '30' })).reservedForCreate, 10);
  assert.equal(budgetSettings(loadConfig({ H2H_RATE_LIMIT: '10' })).reservedForCreate, 3);
  assert.equal(
    budgetSettings(loadConfig({ H2H_RATE_LIMIT: '30', H2H_RATE_RESERVE_CREATE: '0' })).reservedForCreate,
    0,
  );
});

test('API_SUBMISSION_MAX_AGE_S is an hour by default, 0 turns expiry off, and a negative is refused naming the variable', () => {
  assert.equal(apiSettings(loadConfig({})).submissionMaxAgeMs, 3_600_000);
  assert.equal(apiSettings(loadConfig({ API_SUBMISSION_MAX_AGE_S: '0' })).submissionMaxAgeMs, 0);
  assert.equal(apiSettings(loadConfig({ API_SUBMISSION_MAX_AGE_S: '900' })).submissionMaxAgeMs, 900_000);
  for (const value of ['-1', '1.5', 'an hour']) {
    assert.throws(
      () => loadConfig({ API_SUBMISSION_MAX_AGE_S: value }),
      (err: unknown) =>
        err instanceof ConfigError && err.message.includes(`API_SUBMISSION_MAX_AGE_S="${value}"`),
      value,
    );
  }
});

test('the README settings table is the one generated from the schema', () => {
  const readme = readFileSync('README.md', 'utf8');
  assert.ok(
    readme.includes(settingsTable()),
    'README is out of date: paste the output of `npm run docs:config`',
  );
});

test('a claim lasts RECONCILE_LEASE_S, 45 s by default, and at least twice the connect and answer time-outs together', () => {
  assert.equal(loadConfig({}).settings.RECONCILE_LEASE_S, 45);
  assert.equal(reconcilerSettings(loadConfig({})).leaseMs, 45_000);
  assert.throws(
    () => loadConfig({ RECONCILE_LEASE_S: '39' }),
    (err: unknown) =>
      err instanceof ConfigError &&
      /RECONCILE_LEASE_S \(39\) must be at least twice H2H_CONNECT_TIMEOUT_MS \+ H2H_HEADERS_TIMEOUT_MS \(20000 ms\)/.test(
        err.message,
      ),
  );
  assert.equal(reconcilerSettings(loadConfig({ RECONCILE_LEASE_S: '40' })).leaseMs, 40_000);
  assert.equal(
    reconcilerSettings(
      loadConfig({ RECONCILE_LEASE_S: '2', H2H_CONNECT_TIMEOUT_MS: '300', H2H_HEADERS_TIMEOUT_MS: '700' }),
    ).leaseMs,
    2_000,
  );
});
