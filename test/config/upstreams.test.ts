import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { ConfigError, loadConfig, receiverSettings } from '../../src/config/config.js';
import { capturedLogger } from '../helpers/logs.js';

/** Writes `content` (JSON unless a string) to a file removed when the test ends; returns its path. */
function upstreamsFile(t: TestContext, content: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'h2h-upstreams-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'upstreams.json');
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

const refusal = (pattern: RegExp) => (error: unknown) =>
  error instanceof ConfigError && pattern.test(error.message);

test("without a file there is one upstream, named default, of today's settings", () => {
  const config = loadConfig({
    H2H_BASE_URL: 'https://a.example/v1/member-api',
    H2H_API_KEY: 'key-a',
    H2H_API_SECRET: 'new,old',
    H2H_RATE_LIMIT: '30',
  });
  assert.deepEqual(config.upstreams, [
    {
      name: 'default',
      baseUrl: 'https://a.example/v1/member-api',
      apiKey: 'key-a',
      secrets: ['new', 'old'],
      rateLimit: 30,
      priority: 0,
      variables: { apiKey: 'H2H_API_KEY', secret: 'H2H_API_SECRET' },
    },
  ]);
});

test("a file lists the upstreams; each one's key and secrets come from variables named after it", (t) => {
  const file = upstreamsFile(t, {
    upstreams: [
      { name: 'default' },
      { name: 'beta-2', base_url: 'https://b.example/v1/member-api', rate_limit: 120, priority: 5 },
    ],
  });
  const config = loadConfig({
    H2H_UPSTREAMS_FILE: file,
    H2H_BASE_URL: 'https://a.example/v1/member-api',
    H2H_API_KEY: 'key-a',
    H2H_API_SECRET: 'secret-a',
    H2H_UPSTREAM_BETA_2_API_KEY: 'key-b',
    H2H_UPSTREAM_BETA_2_API_SECRET: 'secret-b2, secret-b1',
  });

  assert.deepEqual(
    config.upstreams.map(({ name, baseUrl, apiKey, secrets, rateLimit, priority }) => ({
      name,
      baseUrl,
      apiKey,
      secrets,
      rateLimit,
      priority,
    })),
    [
      {
        name: 'default',
        baseUrl: 'https://a.example/v1/member-api',
        apiKey: 'key-a',
        secrets: ['secret-a'],
        rateLimit: 60,
        priority: 0,
      },
      {
        name: 'beta-2',
        baseUrl: 'https://b.example/v1/member-api',
        apiKey: 'key-b',
        secrets: ['secret-b2', 'secret-b1'],
        rateLimit: 120,
        priority: 5,
      },
    ],
  );
  assert.deepEqual(receiverSettings(config).upstreams, [
    { name: 'default', secrets: ['secret-a'] },
    { name: 'beta-2', secrets: ['secret-b2', 'secret-b1'] },
  ]);
});

test('a bad file is refused at start-up, naming the file, the upstream and the field', (t) => {
  const load = (content: unknown) => () => loadConfig({ H2H_UPSTREAMS_FILE: upstreamsFile(t, content) });
  assert.throws(load('{ not json'), refusal(/upstreams\.json is not valid: it is not JSON/));
  assert.throws(
    load({ upstreams: [{ name: 'beta', base_url: 'https://b.example', rate_limt: 60 }] }),
    refusal(/upstreams\[0\] \("beta"\): Unrecognized key: "rate_limt"/),
  );
  assert.throws(
    load({ upstreams: [{ name: 'beta' }] }),
    refusal(
      /upstreams\[0\] \("beta"\)\.base_url: is required \(only the default upstream takes H2H_BASE_URL\)/,
    ),
  );
  assert.throws(
    load({ upstreams: [{ name: 'Beta_1', base_url: 'https://b.example' }] }),
    refusal(/upstreams\[0\] \("Beta_1"\)\.name: must be a-z, digits and -/),
  );
  assert.throws(
    load({ upstreams: [{ name: 'default' }, { name: 'default' }] }),
    refusal(/upstreams\[1\] \("default"\)\.name: "default" is listed twice/),
  );
  assert.throws(load({ upstreams: [] }), refusal(/upstreams: must list at least one upstream/));
  // Orders are placed on the default upstream: its webhooks keep their path, its settings their variables.
  assert.throws(
    load({ upstreams: [{ name: 'beta', base_url: 'https://b.example' }] }),
    refusal(/upstreams: must list the default upstream \(\{"name": "default"\}\): orders are placed on it/),
  );
  assert.throws(
    load({ upstreams: [{ name: 'default', base_url: 'https://a.example', rate_limit: 30 }] }),
    refusal(
      /upstreams\[0\] \("default"\)\.base_url: is the default upstream's H2H_BASE_URL: set it there.*rate_limit: is the default upstream's H2H_RATE_LIMIT/,
    ),
  );
  assert.throws(
    () => loadConfig({ H2H_UPSTREAMS_FILE: '/nonexistent/upstreams.json' }),
    refusal(/H2H_UPSTREAMS_FILE \/nonexistent\/upstreams\.json is not valid: it cannot be read \(ENOENT\)/),
  );
});

test("the receiver refuses to start without an upstream's webhook secrets, naming its variable", (t) => {
  const config = loadConfig({
    H2H_UPSTREAMS_FILE: upstreamsFile(t, {
      upstreams: [{ name: 'default' }, { name: 'beta', base_url: 'https://b.example' }],
    }),
    H2H_API_SECRET: 'default-secret',
  });
  assert.throws(
    () => receiverSettings(config),
    refusal(
      /H2H_UPSTREAM_BETA_API_SECRET must be set \(comma-separated, newest first\) to verify the webhooks of upstream "beta"/,
    ),
  );
});

test("every upstream's key and secrets are redacted from logs", (t) => {
  const config = loadConfig({
    H2H_UPSTREAMS_FILE: upstreamsFile(t, {
      upstreams: [{ name: 'default' }, { name: 'beta', base_url: 'https://b.example' }],
    }),
    H2H_UPSTREAM_BETA_API_KEY: 'key-beta-123',
    H2H_UPSTREAM_BETA_API_SECRET: 'secret-beta-456',
  });
  const { logger, lines } = capturedLogger({ name: 'config', level: 'info' });
  logger.info({ upstreams: config.upstreams }, 'upstreams');
  logger.info({ config: { upstreams: config.upstreams } }, 'config');
  const text = lines.join('');
  assert.match(text, /"name":"beta"/);
  assert.equal(text.includes('key-beta-123'), false);
  assert.equal(text.includes('secret-beta-456'), false);
});
