import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type DriftState, observeDrift } from '../../src/domain/drift-rules.js';

const NONE: DriftState = { drift: 0, drift_unexplained: 0, drift_since: null, drift_alerted: 0 };

/**
 * Reads in a row, each `[profile, accounted, inDoubt]` (the first one's `accounted` unused: there
 * is no ledger before it), threaded through the state a read leaves.
 */
function reads(threshold: number, ...seen: Array<[number, number, number]>) {
  let previous: DriftState | undefined;
  return seen.map(([profile, accounted, inDoubt], i) => {
    const observed = observeDrift({
      previous,
      profile,
      accounted: i === 0 ? undefined : accounted,
      inDoubt,
      threshold,
      readAt: i + 1,
    });
    previous = observed;
    return observed;
  });
}

test('the first read is the baseline: nothing was expected before it', () => {
  const [first] = reads(1_000, [500_000, 0, 0]);
  assert.deepEqual([first!.drift, first!.expected, first!.drift_since], [0, 500_000, null]);
  const again = observeDrift({
    previous: undefined,
    profile: 9,
    accounted: undefined,
    inDoubt: 0,
    threshold: 1,
    readAt: 1,
  });
  assert.equal(again.drift, 0);
});

test('a negative drift is explained up to the creates in doubt; the part beyond them is not', () => {
  const [, within, beyond] = reads(
    1_000,
    [100_000, 0, 0],
    [80_000, 100_000, 20_000],
    [70_000, 80_000, 5_000],
  );
  assert.deepEqual([within!.drift, within!.drift_unexplained, within!.drift_since], [-20_000, 0, null]);
  assert.deepEqual([beyond!.drift, beyond!.drift_unexplained, beyond!.drift_since], [-30_000, -25_000, 3]);
  assert.equal(beyond!.audit_owed, 0, 'a debit never learnt steers no refund audit');
});

test('an episode whose sign turns is a new one: its event waits for its own second read', () => {
  const seen = reads(
    1_000,
    [100_000, 0, 0],
    [105_000, 100_000, 0], // +5,000: an episode begins
    [105_000, 105_000, 0], // still +5,000: its event
    [95_000, 105_000, 0], // -5,000: a new episode
    [95_000, 95_000, 0], // its event
  );
  assert.deepEqual(
    seen.map((o) => [o.drift, o.drift_since, o.alert]),
    [
      [0, null, false],
      [5_000, 2, false],
      [5_000, 2, true],
      [-5_000, 4, false],
      [-5_000, 4, true],
    ],
  );
  assert.deepEqual(
    [seen[1]!.audit_owed, seen[3]!.audit_owed],
    [4_000, 0],
    'what the positive drift exceeds the threshold by',
  );
});

test('with the threshold 0 the drift is carried and shown, but starts no episode, event or audit', () => {
  const seen = reads(0, [100_000, 0, 0], [150_000, 100_000, 0], [150_000, 150_000, 0]);
  assert.deepEqual(
    seen.map((o) => [o.drift, o.drift_since, o.alert, o.audit_owed]),
    [
      [0, null, false, 0],
      [50_000, null, false, 0],
      [50_000, null, false, 0],
    ],
  );
  assert.deepEqual(
    observeDrift({ previous: NONE, profile: 1, accounted: 1, inDoubt: 0, threshold: 0, readAt: 1 }).drift,
    0,
  );
});
