import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { DEMO_TIMELINES, runDemo } from '../../src/demo/demo.js';
import { publicDemoReport } from '../../src/demo/demo-actions.js';
import { publicFormBreaches } from '../helpers/public-json.js';

const redisServers = () => {
  try {
    return execFileSync('pgrep', ['-f', 'h2h-demo-'], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
};

test('the demo shop places an order on every timeline through the API under faults; store, upstream and shop end equal, and nothing is left running', async () => {
  const report = await runDemo({ perTimeline: 1, seed: 7 });
  assert.deepEqual(
    report.rows.filter((r) => !r.converged || !r.shopAgrees),
    [],
  );
  assert.equal(report.allEqual, true);
  for (const row of report.rows) {
    if (row.refusedByApi !== null) {
      // A local target check may refuse the INVALID_TARGET order at the API: then nothing exists.
      assert.equal(row.timeline, 'refused: INVALID_TARGET', `${row.partnerRef}: only that order is refused`);
      assert.deepEqual([row.local, row.upstream, row.shopVersion], ['none', 'none', null]);
      continue;
    }
    assert.equal(row.upstream, row.local, `${row.partnerRef}: the store shows the upstream's truth`);
    assert.equal(row.shop, row.local, `${row.partnerRef}: the shop shows what the store shows`);
    const held = report.shop.orders.find((o) => o.partner_ref === row.partnerRef);
    assert.equal(held?.version, row.shopVersion, `${row.partnerRef}: the shop holds the version shown`);
  }
  assert.ok(
    report.rows.some((r) => r.shop === 'rejected INVALID_TARGET' || r.refusedByApi !== null),
    'the shop learnt of the refusal: a rejection notification, or the API refused the order',
  );

  // Every notification the shop was sent verified with the standardwebhooks package.
  const { notifications } = report.shop;
  assert.ok(
    notifications.received >= report.rows.filter((r) => r.refusedByApi === null).length,
    `every order was notified at least once: ${JSON.stringify(notifications)}`,
  );
  assert.equal(notifications.verified, notifications.received);
  assert.equal(notifications.rejected, 0);
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
  // Which of a poll and the audit (re-reading settled SUCCESS orders) finds a lost refund or serial
  // first is a race in real time; one of them must.
  assert.ok(
    reconciler.changed + reconciler.auditChanged > 0,
    `polls or the audit found what the dropped webhooks carried: ${JSON.stringify(report.counts)}`,
  );
  for (const value of [
    ...Object.values(webhooks),
    ...Object.values(receiver),
    ...Object.values(reconciler),
  ]) {
    assert.ok(Number.isInteger(value) && value >= 0, `a count is a whole number: ${value}`);
  }
  const printed = publicDemoReport(report);
  assert.deepEqual(publicFormBreaches(printed), [], 'demo --json prints the public form');
  assert.equal(printed.all_equal, true);
  assert.equal(printed.shop.orders, report.shop.orders, 'the shop’s orders as they are');
  assert.equal(redisServers(), '', 'the demo stops its private redis-server');
});
