import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { ClientArgs, ClientReport } from '../fixtures/budget-client-process.js';
import { FIXTURE_EXEC_ARGV } from '../helpers/fixture-process.js';
import { privateRedis } from '../helpers/redis.js';
import { startSimulator } from '../helpers/simulator.js';

const CLIENT = fileURLToPath(new URL('../fixtures/budget-client-process.ts', import.meta.url));

/** Runs one budget client process to its end and returns its report; fails on a non-zero exit. */
function runClient(args: ClientArgs): Promise<ClientReport> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...FIXTURE_EXEC_ARGV, CLIENT, JSON.stringify(args)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`budget client ${args.name} exited ${code}: ${stderr}`));
      else resolve(JSON.parse(stdout.trim()) as ClientReport);
    });
  });
}

/**
 * Three fresh processes against a simulator allowing 10 calls per rolling 2 s. Their budgets keep
 * the default margin (1000 ms, as in production): a grant counts for 3 s, so that a request that
 * reaches the upstream later than one granted after it still finds the upstream's window free.
 * The first requests of a fresh process open its connection and are the slowest; on a loaded
 * machine they took more than 250 ms longer than later ones, and a 250 ms margin let 5 of 41
 * attempts meet a 429.
 */
async function threeProcesses(t: Parameters<typeof privateRedis>[0], useBudget: boolean) {
  const limit = 10;
  const windowMs = 2_000;
  const sim = await startSimulator(t, { rateLimit: limit, rateWindowMs: windowMs });
  const redis = await privateRedis(t);
  const common = {
    redisUrl: redis.url,
    baseUrl: sim.sim.baseUrl,
    apiKey: sim.member.api_key,
    limit,
    windowMs,
    calls: 12,
    useBudget,
  };
  const started = performance.now();
  const reports = await Promise.all(['p1', 'p2', 'p3'].map((name) => runClient({ ...common, name })));
  return { sim, windowMs, reports, elapsed: performance.now() - started };
}

test('three processes sharing one budget make well over the limit of calls, all complete and the upstream answers no 429', async (t) => {
  const { sim, windowMs, reports, elapsed } = await threeProcesses(t, true);

  const results = reports.flatMap((r) => r.results);
  const statuses = reports.flatMap((r) => r.attemptStatuses);
  assert.equal(results.length, 36);
  assert.deepEqual(
    results.filter((r) => !r.ok),
    [],
  );
  assert.equal(statuses.filter((s) => s === 429).length, 0, `statuses: ${statuses.join(',')}`);
  assert.equal(statuses.length, 36, 'one attempt per call: nothing was retried');
  assert.ok(statuses.every((s) => s === 200 || s === 201));
  const orders = await sim.allOrders();
  assert.equal(orders.length, 12);
  // 36 calls at 10 per rolling 2 s cannot finish within three windows: the budget held them back.
  assert.ok(elapsed >= 3 * windowMs, `36 calls took only ${Math.round(elapsed)} ms`);
});

test('without the shared budget the same three processes get 429s: the proof above can fail', async (t) => {
  const { reports } = await threeProcesses(t, false);

  const statuses = reports.flatMap((r) => r.attemptStatuses);
  assert.ok(statuses.includes(429), `statuses: ${statuses.join(',')}`);
});
