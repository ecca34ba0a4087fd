import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, DEFAULT_DB_PATH, loadConfig, workerSettings } from '../../src/config/config.js';

test('the worker settings default to 100 jobs in flight, batches of up to 100, and BullMQ’s lock and stall defaults', () => {
  const settings = workerSettings(loadConfig({}));
  assert.deepEqual(settings, {
    redisUrl: 'redis://127.0.0.1:6380',
    dbUrl: `sqlite://${DEFAULT_DB_PATH}`,
    dbLockTimeoutMs: 5000,
    dbPoolMax: 10,
    concurrency: 100,
    batchSize: 100,
    lockDurationMs: 30_000,
    stalledIntervalMs: 30_000,
    maxStalledCount: 1,
    storeLockWaitMs: 5_000,
    shutdownTimeoutMs: 10_000,
    feedRetentionMs: 30 * 86_400_000,
    historyRetentionMs: 0,
    logLevel: 'info',
    logFormat: 'auto',
  });
});

test('a batch never holds more events than the jobs in flight', () => {
  const capped = workerSettings(loadConfig({ H2H_WORKER_CONCURRENCY: '20', H2H_WORKER_BATCH_SIZE: '500' }));
  assert.deepEqual([capped.concurrency, capped.batchSize], [20, 20]);
  const smaller = workerSettings(loadConfig({ H2H_WORKER_CONCURRENCY: '200', H2H_WORKER_BATCH_SIZE: '50' }));
  assert.deepEqual([smaller.concurrency, smaller.batchSize], [200, 50]);
});

test('a malformed worker setting stops start-up naming the variable', () => {
  assert.throws(
    () => loadConfig({ H2H_WORKER_CONCURRENCY: '0', H2H_WORKER_LOCK_DURATION_MS: 'soon' }),
    (err: unknown) =>
      err instanceof ConfigError &&
      /H2H_WORKER_CONCURRENCY="0"/.test(err.message) &&
      /H2H_WORKER_LOCK_DURATION_MS="soon"/.test(err.message),
  );
});

test('the history is kept for ever by default, and when set it outlives the feed: a shorter one stops start-up naming the fix', () => {
  const day = 86_400_000;
  assert.equal(workerSettings(loadConfig({})).historyRetentionMs, 0);
  const set = workerSettings(loadConfig({ H2H_HISTORY_RETENTION_D: '400' }));
  assert.deepEqual([set.feedRetentionMs, set.historyRetentionMs], [30 * day, 400 * day]);
  assert.equal(
    workerSettings(loadConfig({ H2H_HISTORY_RETENTION_D: '7', H2H_FEED_RETENTION_D: '7' }))
      .historyRetentionMs,
    7 * day,
  );
  assert.throws(
    () => loadConfig({ H2H_HISTORY_RETENTION_D: '10' }),
    (err: unknown) =>
      err instanceof ConfigError &&
      /H2H_HISTORY_RETENTION_D \(10\) must be 0 \(keep the history for ever\) or at least H2H_FEED_RETENTION_D \(30\)/.test(
        err.message,
      ) &&
      /raise H2H_HISTORY_RETENTION_D, or lower H2H_FEED_RETENTION_D/.test(err.message),
  );
});
