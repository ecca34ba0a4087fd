import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig, notifySettings } from '../../src/config/config.js';
import { DEFAULT_NOTIFY_RETRY_S, NOTIFY_JITTER, retryDelayMs } from '../../src/notify/retry-schedule.js';

test('the default retry schedule keeps trying for more than three days, even with the least jitter', () => {
  const { retryScheduleMs } = notifySettings(loadConfig({}));
  const total = retryScheduleMs.reduce((sum, _, i) => sum + retryDelayMs(i + 1, retryScheduleMs, () => 0), 0);
  assert.ok(total > 3 * 86_400_000, `${total / 86_400_000} days`);
  assert.deepEqual(
    retryScheduleMs,
    DEFAULT_NOTIFY_RETRY_S.map((s) => s * 1000),
  );
});

test('each wait is its entry of the schedule plus at most the jitter; past the end the last repeats', () => {
  const schedule = [1000, 4000];
  assert.equal(
    retryDelayMs(1, schedule, () => 0),
    1000,
  );
  assert.equal(
    retryDelayMs(2, schedule, () => 0.999),
    Math.round(4000 * (1 + NOTIFY_JITTER * 0.999)),
  );
  assert.equal(
    retryDelayMs(7, schedule, () => 0),
    4000,
  );
});

test('H2H_NOTIFY_RETRY_S takes fractions of a second and refuses anything else, naming the variable', () => {
  assert.deepEqual(notifySettings(loadConfig({ H2H_NOTIFY_RETRY_S: '0.05, 2' })).retryScheduleMs, [50, 2000]);
  assert.throws(() => loadConfig({ H2H_NOTIFY_RETRY_S: '5,-1' }), /H2H_NOTIFY_RETRY_S="5,-1" is not valid/);
});
