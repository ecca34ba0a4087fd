import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  afterChange,
  afterSubmissionOutcome,
  type FirstPollLookup,
  firstPollAt,
  firstPollPlan,
  isSettled,
  planPollRecord,
  type ScheduleRuleSettings,
} from '../../src/domain/poll-rules.js';
import { NOW, orderRow } from '../helpers/order-row.js';

const SCHEDULE: ScheduleRuleSettings = { backoffMs: [60_000, 300_000], stuckAfterMs: 86_400_000 };
/** The first poll's settings: 120 s without a learned pace, else between 30 s and 10 min from the change. */
const FIRST_POLL = { firstPollDelayMs: 120_000, firstPollMinMs: 30_000, firstPollMaxMs: 600_000 };

test('settled: rejected, FAILED, REFUNDED, SUCCESS with its serial or stuck; nothing else', () => {
  const table: Array<[Parameters<typeof orderRow>[0], boolean]> = [
    [{ submission_state: 'rejected', status: null }, true],
    [{ status: 'FAILED' }, true],
    [{ status: 'REFUNDED' }, true],
    [{ status: 'SUCCESS', serial_number: 'SN1' }, true],
    [{ status: 'SUCCESS', serial_number: null, stuck_at: NOW }, true],
    [{ status: 'SUCCESS', serial_number: null }, false],
    [{ status: 'PROCESSING', stuck_at: NOW }, false],
    [{ status: null, submission_state: 'unknown' }, false],
  ];
  for (const [fields, settled] of table)
    assert.equal(isSettled(orderRow(fields)), settled, JSON.stringify(fields));
});

test('after a create call that got no order, an unknown outcome is due for a poll at once, as is a blocked one; a rejected or cancelled one never', () => {
  // Written before the create was sent: a first poll an hour away, which must not stand.
  const waiting = { status: null, upstream_status: null, next_poll_at: NOW + 3_600_000 };
  const table: Array<[Parameters<typeof orderRow>[0], number | null]> = [
    [{ ...waiting, submission_state: 'unknown' }, NOW],
    [{ ...waiting, submission_state: 'unknown', create_in_doubt_at: NOW - 20_000 }, NOW],
    [{ ...waiting, submission_state: 'blocked', blocked_code: 'IP_NOT_WHITELISTED' }, NOW],
    [{ ...waiting, submission_state: 'rejected', rejection_code: 'INVALID_TARGET' }, null],
    [{ ...waiting, submission_state: 'cancelled', cancel_code: 'EXPIRED' }, null],
  ];
  for (const [fields, nextPollAt] of table) {
    assert.deepEqual(
      afterSubmissionOutcome(orderRow(fields), NOW),
      { next_poll_at: nextPollAt },
      JSON.stringify(fields),
    );
  }
});

/**
 * Every product's plan as the reconciler writes it (firstPollPlan) for a learned time to final
 * (the median delivery delay 1 s), from the product's own orders unless `scope` says every
 * product's; `null`: nothing learned.
 */
const plans = (
  finalMs: number | null,
  outlierMs = 20 * (finalMs ?? 0),
  scope: 'product' | 'all' = 'product',
): FirstPollLookup => {
  const plan = firstPollPlan(
    FIRST_POLL,
    finalMs === null ? null : { finalMs, outlierMs, deliveryMs: 1000, samples: 50, scope },
  );
  return () => plan;
};

test('the learned first poll is bounded by firstPollMinMs and firstPollMaxMs from now', () => {
  const row = { upstream: 'default', product_code: 'ML86', local_created_at: NOW, created_at: null };
  assert.equal(firstPollAt(row, NOW, plans(null)), NOW + 120_000);
  assert.equal(firstPollAt(row, NOW, plans(200_000)), NOW + 201_000);
  assert.equal(firstPollAt(row, NOW, plans(1000)), NOW + 30_000);
  assert.equal(firstPollAt(row, NOW, plans(10_000_000)), NOW + 600_000);
});

test('an order that waited before it was sent is first polled from its creation upstream, not at once', () => {
  // Queued (or waiting for a budget slot) 150 s, then created upstream and accepted now: counted
  // from the local creation the first poll would be due 50 s ago, i.e. at the 30 s minimum,
  // and would find the order still PENDING.
  const waited = {
    upstream: 'default',
    product_code: 'ML86',
    local_created_at: NOW - 150_000,
    created_at: new Date(NOW).toISOString(),
  };
  assert.equal(firstPollAt(waited, NOW, plans(100_000)), NOW + 101_000);
  // Later changes keep counting from the upstream creation.
  assert.equal(firstPollAt(waited, NOW + 40_000, plans(100_000)), NOW + 101_000);
});

test('the upstream creation time moves the first poll only later than the local creation, never past now', () => {
  const row = (createdAt: string | null) => ({
    upstream: 'default',
    product_code: 'ML86',
    local_created_at: NOW,
    created_at: createdAt,
  });
  // An upstream clock 20 s behind ours: the local creation counts.
  assert.equal(firstPollAt(row(new Date(NOW - 20_000).toISOString()), NOW, plans(100_000)), NOW + 101_000);
  // An upstream clock 20 s ahead, the answer read at once: counted from now, not from 20 s ahead.
  assert.equal(firstPollAt(row(new Date(NOW + 20_000).toISOString()), NOW, plans(100_000)), NOW + 101_000);
  // A created_at the upstream sent in a form that does not parse: the local creation counts.
  assert.equal(firstPollAt(row('yesterday'), NOW, plans(100_000)), NOW + 101_000);
});

test("the first poll is planned by the written order's upstream's plan of its product, and only for an open order", () => {
  const asked: Array<[string, string | null]> = [];
  const lookup: FirstPollLookup = (order) => {
    asked.push([order.upstream, order.product_code]);
    return plans(null)(order);
  };
  assert.equal(
    afterChange(orderRow({ status: 'FAILED', final_at: NOW }), null, true, NOW, lookup).next_poll_at,
    null,
  );
  assert.equal(
    afterChange(orderRow({ submission_state: 'queued', status: null }), null, true, NOW, lookup).next_poll_at,
    null,
  );
  assert.deepEqual(asked, []);
  const moved = afterChange(
    orderRow({ upstream: 'beta', product_code: 'FF100' }),
    orderRow({ upstream: 'beta' }),
    true,
    NOW,
    lookup,
  );
  assert.deepEqual(asked, [['beta', 'FF100']]);
  assert.deepEqual(moved, { next_poll_at: NOW + 120_000, poll_count: 0 });
});

test('a failed poll keeps last_polled_at; a stuck order waits the longest backoff interval', () => {
  const failed = planPollRecord(
    SCHEDULE,
    orderRow({ last_polled_at: NOW - 5000 }),
    'failed',
    NOW,
    plans(null),
  );
  assert.equal(failed.last_polled_at, NOW - 5000);
  assert.equal(failed.poll_count, 3);
  assert.equal(failed.next_poll_at, NOW + 300_000);
  const old = orderRow({ local_created_at: NOW - 86_400_000, poll_count: 0 });
  const stuck = planPollRecord(SCHEDULE, old, 'unchanged', NOW, plans(null));
  assert.equal(stuck.stuck_at, NOW);
  assert.equal(stuck.next_poll_at, NOW + 300_000);
  assert.equal(stuck.last_polled_at, NOW);
});

test('an order open longer than its learned outlier time is polled at the backoff cap, not up the ladder', () => {
  // SCHEDULE's ladder is 60 s, then 300 s (the cap). The order is 10 minutes old and was polled once.
  const open = orderRow({ local_created_at: NOW - 600_000, created_at: null, poll_count: 0 });
  const at = (outcome: 'unchanged' | 'failed', lookup: FirstPollLookup, row = open) =>
    planPollRecord(SCHEDULE, row, outcome, NOW, lookup).next_poll_at;
  // Past its product's outlier time (4 min): an outlier, the cap.
  assert.equal(at('unchanged', plans(60_000, 240_000)), NOW + 300_000);
  // Within it (11 min): the ladder's next step.
  assert.equal(at('unchanged', plans(60_000, 660_000)), NOW + 60_000);
  // Every product's pace, not its own: the ladder.
  assert.equal(at('unchanged', plans(60_000, 240_000, 'all')), NOW + 60_000);
  // No learned pace: the ladder.
  assert.equal(at('unchanged', plans(null)), NOW + 60_000);
  // A poll that got no answer says nothing of the order: the ladder.
  assert.equal(at('failed', plans(60_000, 240_000)), NOW + 60_000);
  // A submission still to be resolved: the ladder.
  const unknown = orderRow({ ...open, submission_state: 'unknown', status: null });
  assert.equal(at('unchanged', plans(60_000, 240_000), unknown), NOW + 60_000);
  // Counted from the creation upstream: created 4 minutes ago, after a 6-minute wait, it is no outlier.
  const waited = orderRow({ ...open, created_at: new Date(NOW - 240_000).toISOString() });
  assert.equal(at('unchanged', plans(60_000, 240_000), waited), NOW + 60_000);
});
