import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig, receiverSettings } from '../../src/config/config.js';

test('the receiver settings have their documented defaults', () => {
  assert.deepEqual(receiverSettings(loadConfig({ H2H_API_SECRET: 'new,old' })), {
    host: '127.0.0.1',
    port: 3000,
    path: '/webhooks/h2h',
    upstreams: [{ name: 'default', secrets: ['new', 'old'] }],
    toleranceS: 300,
    bodyLimit: 262_144,
    headers: {
      timestamp: 'x-timestamp',
      signature: 'x-signature',
      eventId: 'x-event-id',
      eventType: 'x-event-type',
    },
    timeouts: { requestMs: 10_000, headersMs: 5_000, idleMs: 10_000, keepAliveMs: 5_000 },
    maxConnections: 1_024,
    metrics: { host: '127.0.0.1', port: 9_464 },
    enqueueTimeoutMs: 2_000,
    replicaAcks: 0,
    replicaAckTimeoutMs: 500,
    shutdownTimeoutMs: 10_000,
    redisUrl: 'redis://127.0.0.1:6380',
    logLevel: 'info',
    logFormat: 'auto',
  });
});

test('a headers time-out above the request time-out is refused at start-up, naming both', () => {
  assert.throws(
    () =>
      loadConfig({
        H2H_API_SECRET: 's',
        H2H_RECEIVER_REQUEST_TIMEOUT_MS: '1000',
        H2H_RECEIVER_HEADERS_TIMEOUT_MS: '2000',
      }),
    (error: unknown) =>
      error instanceof ConfigError &&
      /H2H_RECEIVER_HEADERS_TIMEOUT_MS \(2000\) must not exceed H2H_RECEIVER_REQUEST_TIMEOUT_MS \(1000\)/.test(
        error.message,
      ),
  );
});

test('header names are taken in lower case, as Node delivers them', () => {
  const settings = receiverSettings(
    loadConfig({ H2H_API_SECRET: 's', H2H_SIGNATURE_HEADER: 'X-Hub-Signature', PORT: '0' }),
  );
  assert.equal(settings.headers.signature, 'x-hub-signature');
  assert.equal(settings.port, 0);
});

test('a malformed receiver setting fails at start-up naming the variable', () => {
  for (const [name, value] of [
    ['H2H_WEBHOOK_PATH', 'webhooks'],
    ['H2H_TIMESTAMP_HEADER', 'x timestamp'],
    ['PORT', '70000'],
    ['H2H_WEBHOOK_TOLERANCE_S', '0'],
    ['H2H_ENQUEUE_TIMEOUT_MS', 'soon'],
  ] as const) {
    assert.throws(
      () => loadConfig({ [name]: value }),
      (error: unknown) => error instanceof ConfigError && error.message.includes(`${name}=`),
      name,
    );
  }
});

test('the receiver needs a webhook secret', () => {
  assert.throws(() => receiverSettings(loadConfig({})), /H2H_API_SECRET must be set/);
});
