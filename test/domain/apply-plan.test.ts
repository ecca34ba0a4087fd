import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type ApplyOptions, planApply } from '../../src/domain/apply-plan.js';
import { fixedFirstPoll } from '../../src/domain/poll-rules.js';
import { planSettlement, type SubmissionOutcome } from '../../src/domain/submission-plan.js';
import type { SubmissionState } from '../../src/store/local-order.js';
import { readOrderSnapshot } from '../../src/upstream/order-snapshot.js';
import { NOW, orderRow } from '../helpers/order-row.js';
import { snapshot } from '../helpers/store.js';

/** Every product's first poll 120 s after a change. */
const FIRST_POLLS = () => fixedFirstPoll(120_000);

function plan(
  current: ReturnType<typeof orderRow> | null,
  order = snapshot('R1', 'SUCCESS'),
  options: ApplyOptions = { source: 'poll' },
) {
  const read = readOrderSnapshot(order);
  assert.ok(read.ok);
  return planApply({
    current,
    snapshot: order,
    fields: read.snapshot,
    options,
    now: NOW,
    firstPolls: FIRST_POLLS,
  });
}

// Hand-written, as the state machine's tables are: a wrong rule must not pass by agreeing with itself.
const SETTLEMENTS: Array<{
  from: SubmissionState;
  outcome: SubmissionOutcome;
  update: boolean;
  submission: SubmissionState;
  reason: string;
  feed: string | null;
  nextPollAt: number | null;
}> = [
  {
    from: 'queued',
    outcome: { state: 'rejected', code: 'E', detail: 'd' },
    update: true,
    submission: 'rejected',
    reason: 'rejected',
    feed: 'order.rejected',
    nextPollAt: null,
  },
  {
    from: 'pending',
    outcome: { state: 'blocked', code: 'E', detail: 'd', inDoubt: false },
    update: true,
    submission: 'blocked',
    reason: 'blocked',
    feed: 'order.blocked',
    nextPollAt: NOW,
  },
  {
    from: 'pending',
    outcome: { state: 'unknown', inDoubt: true },
    update: true,
    submission: 'unknown',
    reason: 'submission_unknown',
    feed: 'order.updated',
    nextPollAt: NOW,
  },
  {
    from: 'unknown',
    outcome: { state: 'rejected', code: 'E', detail: 'd' },
    update: true,
    submission: 'rejected',
    reason: 'rejected',
    feed: 'order.rejected',
    nextPollAt: null,
  },
  {
    from: 'blocked',
    outcome: { state: 'unknown', inDoubt: true },
    update: true,
    submission: 'unknown',
    reason: 'submission_unknown',
    feed: 'order.updated',
    nextPollAt: NOW,
  },
  {
    from: 'accepted',
    outcome: { state: 'rejected', code: 'E', detail: 'd' },
    update: false,
    submission: 'accepted',
    reason: 'submission_settled',
    feed: null,
    nextPollAt: NOW + 60_000,
  },
  {
    from: 'rejected',
    outcome: { state: 'blocked', code: 'E', detail: 'd', inDoubt: false },
    update: false,
    submission: 'rejected',
    reason: 'submission_settled',
    feed: null,
    nextPollAt: NOW + 60_000,
  },
];

test('a create outcome settles only an open submission, with the reason, the next poll and the feed event of its table row', () => {
  for (const row of SETTLEMENTS) {
    const current = orderRow({ submission_state: row.from, status: null, upstream_status: null });
    const settled = planSettlement(current, row.outcome, NOW);
    const label = `${row.from} + ${row.outcome.state}`;
    assert.equal(settled.update, row.update, label);
    assert.equal(settled.row.submission_state, row.submission, label);
    assert.equal(settled.row.status, null, `${label} never touches status`);
    assert.equal(settled.event.reason, row.reason, label);
    assert.equal(settled.event.changed, row.update ? 1 : 0, label);
    assert.equal(settled.feed?.type ?? null, row.feed, label);
    assert.equal(settled.row.next_poll_at, row.nextPollAt, label);
    assert.equal(settled.row.version, row.feed === null ? 3 : 4, `${label}: the version counts feed events`);
  }
});

test('a snapshot of an unknown order plans its insert as accepted, with order.submitted at version 1', () => {
  const planned = plan(null);
  assert.equal(planned.write, 'insert');
  assert.equal(planned.created, true);
  assert.equal(planned.row.submission_state, 'accepted');
  assert.equal(planned.row.final_at, NOW);
  assert.equal(planned.feed?.type, 'order.submitted');
  assert.equal(planned.feed?.order.version, 1);
  assert.equal(planned.row.version, 1);
});

test('a snapshot without a partner_ref of an unknown order is refused: nothing could find the order again', () => {
  assert.throws(() => plan(null, snapshot('R1', 'SUCCESS', { partner_ref: null as unknown as string })), {
    code: 'INVALID_SNAPSHOT',
  });
});

test('an older snapshot plans no write and no feed event, keeps the schedule, and leaves the given row as it was', () => {
  const current = orderRow({
    status: 'SUCCESS',
    upstream_status: 'SUCCESS',
    serial_number: 'SN1',
    final_at: NOW - 1000,
    next_poll_at: null,
  });
  const before = structuredClone(current);
  const planned = plan(current, snapshot('R1', 'PROCESSING'));
  assert.equal(planned.write, 'none');
  assert.equal(planned.feed, null);
  assert.equal(planned.changed, false);
  assert.equal(planned.event.changed, 0);
  assert.deepEqual(current, before);
});

test('a status outside the table is kept in upstream_status only', () => {
  const planned = plan(orderRow(), snapshot('R1', 'ON_HOLD'));
  assert.equal(planned.reason, 'unknown_status');
  assert.equal(planned.row.status, 'PROCESSING');
  assert.equal(planned.row.upstream_status, 'ON_HOLD');
  assert.equal(planned.changed, false);
});

test('a webhook records its event time beside its arrival: the facts the reconciler learns the pace from', () => {
  const occurredAt = Date.parse('2026-11-01T11:02:00.000Z');
  const planned = plan(orderRow(), snapshot('R1', 'FAILED', { created_at: '2026-11-01T11:00:00.000Z' }), {
    source: 'webhook',
    occurredAt,
    receivedAt: occurredAt + 1500,
  });
  assert.equal(planned.event.occurred_at, occurredAt);
  assert.equal(planned.event.received_at, occurredAt + 1500);
  assert.equal(
    plan(orderRow(), snapshot('R1', 'FAILED')).event.occurred_at,
    null,
    'a poll says nothing of when',
  );
});
