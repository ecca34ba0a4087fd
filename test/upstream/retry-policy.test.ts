import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DEFAULT_RETRY,
  isRetryable,
  parseRetryAfter,
  resolveRetryOptions,
  retryDelayMs,
} from '../../src/upstream/retry-policy.js';

describe('retry policy (spec §7 handling rules)', () => {
  test('400, 401 and 404 are never retried; 429 always; 5xx and no answer only when safe to repeat', () => {
    for (const status of [400, 401, 403, 404, 409]) {
      assert.equal(isRetryable({ kind: 'answer', status }, true), false, String(status));
    }
    assert.equal(isRetryable({ kind: 'answer', status: 429 }, false), true);
    for (const status of [500, 502, 503, 504]) {
      assert.equal(isRetryable({ kind: 'answer', status }, true), true, String(status));
      assert.equal(isRetryable({ kind: 'answer', status }, false), false, String(status));
    }
    assert.equal(isRetryable({ kind: 'unreachable' }, true), true);
    assert.equal(isRetryable({ kind: 'unreachable' }, false), false);
  });

  test('backoff is exponential with full jitter, capped at maxDelayMs', () => {
    const options = resolveRetryOptions({ baseDelayMs: 100, maxDelayMs: 500 });
    const unreachable = { kind: 'unreachable' } as const;

    assert.deepEqual(
      [1, 2, 3, 4, 5].map((attempt) => retryDelayMs(attempt, unreachable, options, () => 0.999_999)),
      [99, 199, 399, 499, 499],
    );
    assert.equal(
      retryDelayMs(3, unreachable, options, () => 0),
      0,
    );
  });

  test('Retry-After is honoured as sent plus a little jitter, and beyond maxRetryAfterMs the 429 is surfaced', () => {
    const options = resolveRetryOptions({ baseDelayMs: 250, maxRetryAfterMs: 10_000 });

    assert.equal(
      retryDelayMs(1, { kind: 'answer', status: 429, retryAfterMs: 45_000 }, DEFAULT_RETRY, () => 0),
      45_000,
    );
    assert.equal(
      retryDelayMs(1, { kind: 'answer', status: 429, retryAfterMs: 2_000 }, options, () => 0.5),
      2_125,
    );
    assert.equal(retryDelayMs(1, { kind: 'answer', status: 429, retryAfterMs: 11_000 }, options), undefined);
  });

  test('a 429 without Retry-After waits until the rate window has room, at every attempt; a caller that does not wait for the window gets it surfaced', () => {
    const options = resolveRetryOptions({ baseDelayMs: 250, maxRetryAfterMs: 10_000 });
    const full = { kind: 'answer', status: 429, windowRoomMs: 2_500 } as const;

    assert.deepEqual(
      [1, 2, 3].map((attempt) => retryDelayMs(attempt, full, options, () => 0.5)),
      [2_625, 2_625, 2_625],
    );
    assert.equal(
      retryDelayMs(1, { ...full, retryAfterMs: 4_000 }, options, () => 0),
      4_000,
      'Retry-After, when sent, is the wait',
    );
    assert.equal(retryDelayMs(1, { ...full, windowRoomMs: 11_000 }, options), undefined);
    assert.equal(retryDelayMs(1, { kind: 'answer', status: 429 }, options), undefined);
  });

  test('Retry-After is read as seconds or as an HTTP date', () => {
    const now = Date.parse('2026-11-20T10:00:00Z');

    assert.equal(parseRetryAfter('7', now), 7_000);
    assert.equal(parseRetryAfter(['3'], now), 3_000);
    assert.equal(parseRetryAfter('Fri, 20 Nov 2026 10:00:30 GMT', now), 30_000);
    assert.equal(parseRetryAfter('Fri, 20 Nov 2026 09:00:00 GMT', now), 0);
    assert.equal(parseRetryAfter(undefined, now), undefined);
    assert.equal(parseRetryAfter('soon', now), undefined);
  });

  test('the defaults are 4 attempts, 250 ms base, 30 s cap and Retry-After up to 120 s; wrong values throw', () => {
    assert.deepEqual(resolveRetryOptions(), {
      maxAttempts: 4,
      baseDelayMs: 250,
      maxDelayMs: 30_000,
      maxRetryAfterMs: 120_000,
    });
    assert.deepEqual(resolveRetryOptions({ maxAttempts: undefined }), DEFAULT_RETRY);
    assert.throws(() => resolveRetryOptions({ maxAttempts: 1.5 }), /maxAttempts/);
    assert.throws(() => resolveRetryOptions({ baseDelayMs: -1 }), /baseDelayMs/);
  });
});
