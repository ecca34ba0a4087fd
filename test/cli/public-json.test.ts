import assert from 'node:assert/strict';
import { test } from 'node:test';
import { toPublicJson } from '../../src/cli/public-json.js';
import { publicFormBreaches } from '../helpers/public-json.js';

test('toPublicJson writes camelCase keys in snake_case and epoch-ms times under *At keys as ISO 8601 UTC, deeply', () => {
  const value = {
    passId: 'p1',
    startedAt: Date.UTC(2026, 10, 28, 18),
    probedAt: null,
    oldestOpenAgeS: 42,
    durationMs: 1500,
    budget: { pollCeiling: 80, pollsWaiting: false },
    events: [{ eventId: 'e1', receivedAt: '2026-11-28T18:00:01.000Z' }],
  };

  assert.deepEqual(toPublicJson(value), {
    pass_id: 'p1',
    started_at: '2026-11-28T18:00:00.000Z',
    probed_at: null,
    oldest_open_age_s: 42,
    duration_ms: 1500,
    budget: { poll_ceiling: 80, polls_waiting: false },
    events: [{ event_id: 'e1', received_at: '2026-11-28T18:00:01.000Z' }],
  });
});

test('toPublicJson leaves keys that are data as they are: statuses, snake_case keys, a count under a key not ending in At', () => {
  const value = { byStatus: { SUCCESS: 2, PENDING: 1 }, last_feed_seq: 1_700_000, queued: 3 };

  assert.deepEqual(toPublicJson(value), {
    by_status: { SUCCESS: 2, PENDING: 1 },
    last_feed_seq: 1_700_000,
    queued: 3,
  });
});

test('the public-form check names each camelCase key and epoch-ms time it finds (the check the CLI tests rely on)', () => {
  const breaches = publicFormBreaches({
    orders: { oldestOpenAgeS: 1, open_at: 1_764_352_800_000 },
    tokens: [{ created_at: '2026-11-28 18:00' }],
  });

  assert.deepEqual(breaches, [
    '$.orders.oldestOpenAgeS: a camelCase key',
    '$.orders.open_at is 1764352800000, not an ISO 8601 UTC time',
    '$.orders.open_at is 1764352800000, an epoch-ms time: print it as ISO 8601 UTC',
    '$.tokens[0].created_at is "2026-11-28 18:00", not an ISO 8601 UTC time',
  ]);
});
