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
  assert.equal(redisServers(), '', 'the demo stops its private redis-server');
});
