import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseSince } from '../../src/cli/commands/notifications-actions.js';
import { NotifyError } from '../../src/notify/notify-error.js';

test('--since takes an ISO 8601 time with Z or an offset, and refuses one this machine would have to guess the zone of', () => {
  assert.equal(parseSince('2026-11-25T09:00:00Z'), Date.UTC(2026, 10, 25, 9));
  assert.equal(parseSince('2026-11-25T16:00:00+07:00'), Date.UTC(2026, 10, 25, 9));
  assert.equal(parseSince(undefined), 0);
  for (const text of ['2026-11-25T09:00:00', '2026-11-25', 'yesterday', '2026-13-01T00:00:00Z']) {
    assert.throws(
      () => parseSince(text),
      (error: unknown) =>
        error instanceof NotifyError &&
        error.code === 'INVALID_SINCE' &&
        /with Z or an offset .* e\.g\. 2026-11-25T09:00:00Z/.test(error.message),
      text,
    );
  }
});
