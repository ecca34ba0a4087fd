import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { DEMO_TIMELINES, runDemo } from '../../src/demo/demo.js';

const redisServers = () => {
  try {
    return execFileSync('pgrep', ['-f', 'h2h-demo-'], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
};

test('the demo places an order on every timeline under faults, every one converges, and nothing is left running', async () => {
  const report = await runDemo({ perTimeline: 1, seed: 7 });
  assert.deepEqual(
    report.rows.filter((r) => !r.converged),
    [],
  );
  assert.equal(report.rows.length, DEMO_TIMELINES.length);
  assert.deepEqual(
    new Set(report.rows.map((r) => r.timeline)),
    new Set(DEMO_TIMELINES.map((t) => t.timeline)),
  );
  assert.ok(report.rows.some((r) => r.local.startsWith('REFUNDED')));
  assert.equal(report.profile, 'realistic', 'the demo runs the realistic profile by default');

  // The summary's counts agree with each other: the simulator's fault counters against the
  // receiver's and the reconciler's own metrics.
  const { webhooks, receiver, reconciler } = report.counts;
  assert.ok(webhooks.events > 0 && webhooks.attempts >= webhooks.events);
  assert.equal(
    receiver.refusedBadSignature,
    webhooks.badSignature,
    'every copy the simulator signed wrongly was refused by the receiver, and nothing else',
  );
  assert.equal(
    receiver.accepted + receiver.duplicate,
    webhooks.delivered,
    'every delivered copy was accepted or recognised as a duplicate',
  );
  assert.ok(
    receiver.duplicate >= webhooks.duplicated - webhooks.badSignature,
    'duplicated copies are recognised',
  );
  assert.ok(webhooks.dropped > 0, 'a quarter of the attempts are dropped (seed 7)');
  assert.equal(reconciler.polls, reconciler.changed + reconciler.wasted + reconciler.otherPolls);
  assert.ok(reconciler.changed > 0, 'polls found what the dropped webhooks carried');
  for (const value of [
    ...Object.values(webhooks),
    ...Object.values(receiver),
    ...Object.values(reconciler),
  ]) {
    assert.ok(Number.isInteger(value) && value >= 0, `a count is a whole number: ${value}`);
  }
  assert.equal(redisServers(), '', 'the demo stops its private redis-server');
});
