import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { runUpstreamsDemo } from '../../src/demo/upstreams-demo.js';
import { publicUpstreamsDemoReport, upstreamsSummaryLines } from '../../src/demo/upstreams-demo-report.js';
import { publicFormBreaches } from '../helpers/public-json.js';

const redisServers = () => {
  try {
    return execFileSync('pgrep', ['-f', 'h2h-demo-'], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
};

// Seed 1 fails beta's 3rd, 5th, 6th, 10th and 12th ordinary orders (its fail_ratio draws, one per
// accepted create, in the order of the creates), so beta's 150,000 (eight orders at 18,500) take at
// most 13 creates even when every FAILED is credited back before the next one: 16 orders
// routed to beta leave at least 3 refused for INSUFFICIENT_BALANCE, whatever the timing.
test('with two upstreams, the cheaper one fails some orders and runs out of balance: each goes on to the other, never two SUCCESS, and store, upstreams and shop agree', async () => {
  const report = await runUpstreamsDemo({ profile: 'fast', seed: 1, rush: 16, later: 2 });

  assert.deepEqual(
    report.rows.filter((r) => !r.agrees),
    [],
  );
  assert.equal(report.allAgree, true);
  assert.equal(report.rows.length, 18);
  for (const row of report.rows) {
    assert.ok(row.final, `${row.partnerRef} ended`);
    assert.ok(row.successes <= 1, `${row.partnerRef}: at most one SUCCESS across the upstreams`);
    assert.ok(row.storeAgreesWithUpstreams && row.shopAgrees, row.partnerRef);
  }
  const { totals } = report;
  assert.ok(
    (totals.failovers.FAILED ?? 0) >= 1,
    `a FAILED on beta went on to default: ${JSON.stringify(totals)}`,
  );
  assert.ok(
    (totals.failovers.INSUFFICIENT_BALANCE ?? 0) >= 3,
    `beta's refusals went on to default: ${JSON.stringify(totals)}`,
  );
  const failedOver = report.rows.find((r) => r.failovers[0] === 'FAILED')!;
  assert.equal(failedOver.attempts, 'beta FAILED → default SUCCESS');
  assert.deepEqual(failedOver.upstreams, { default: '#2 SUCCESS', beta: '#1 FAILED' });
  const refused = report.rows.find((r) => r.failovers[0] === 'INSUFFICIENT_BALANCE')!;
  assert.equal(refused.attempts, 'beta INSUFFICIENT_BALANCE → default SUCCESS');
  assert.deepEqual(refused.upstreams, { default: '#2 SUCCESS', beta: 'none' });

  // Placed once beta's ledger showed its balance below the price: straight to default.
  for (const later of report.rows.slice(16)) {
    assert.equal(later.attempts, 'default SUCCESS');
    assert.match(later.passedOver.join(), /^beta: balance \d+ below the price 18500$/);
  }
  const beta = report.balances.find((b) => b.upstream === 'beta')!;
  assert.ok(beta.simulator < 18_500, `beta ran out of balance: ${JSON.stringify(report.balances)}`);
  assert.equal(totals.deliveredBy.beta, 8, 'beta delivered what its balance paid for');
  assert.equal(totals.notDelivered, 0, 'default delivered every other order');

  const { notifications } = report.shop;
  assert.equal(notifications.verified, notifications.received);
  assert.equal(notifications.rejected, 0);
  assert.match(upstreamsSummaryLines(report).at(-1)!, /^all agree: .* disagreements: 0;/);
  const printed = publicUpstreamsDemoReport(report);
  assert.deepEqual(publicFormBreaches(printed), [], 'demo --upstreams 2 --json prints the public form');
  assert.equal(printed.all_agree, true);
  assert.equal(redisServers(), '', 'the demo stops its private redis-server');
});
