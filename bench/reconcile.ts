/**
 * Reconciliation cost and speed (issue 5): N orders whose webhooks are all lost must reach the
 * upstream's final state by polling alone, spending at most 1.5 polls per order on average and
 * converging within 1.5 × the floor the rate budget sets (N orders need at least N polls, and
 * polling may use only the poll share of the budget).
 *
 *   npm run bench:reconcile -- [--orders 200] [--rate-limit 60] [--window-ms 6000] [--time-scale 0.5]
 *                              [--every-ms 6000]
 *
 * Everything runs in this process on real parts: the simulator over HTTP (rate limit and rolling
 * window equal to the budget's, `webhook_drop` 1), a private redis-server, a SQLite file, the
 * shared rate budget and the reconciler started with `startReconciler` (scheduler, pass worker).
 * Time is scaled down ten times from production (60 calls per 6 s instead of per minute, a pass
 * every 6 s instead of 60 s, first poll after 3 s instead of 30 s), so the run takes about a
 * minute. Orders are placed with `placeOrder`; the clock for convergence starts when the last
 * one is placed, since until then creation (which has priority) fills the budget.
 *
 * Prints the figures and a Markdown row for docs/performance.md; exits 1 when a goal is missed,
 * when the simulator answered any 429, or when an order did not converge.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { loadConfig, reconcilerSettings } from '../src/config/config.js';
import { startRedisServer } from '../src/dev/redis-server.js';
import { createLogger } from '../src/observability/logger.js';
import { placeOrder } from '../src/orders/place-order.js';
import { RateBudget } from '../src/rate-budget/rate-budget.js';
import { startReconciler } from '../src/reconciler/reconciler.js';
import { createSimulator } from '../src/simulator/index.js';
import { openStore, sqliteUrl } from '../src/store/open-store.js';
import { withClaims } from '../src/store/order-store.js';
import { UpstreamClient } from '../src/upstream/client.js';
import type { Order } from '../src/upstream/model.js';

const { values: flags } = parseArgs({
  options: {
    orders: { type: 'string', default: '200' },
    'rate-limit': { type: 'string', default: '60' },
    'window-ms': { type: 'string', default: '6000' },
    'time-scale': { type: 'string', default: '0.5' },
    'every-ms': { type: 'string', default: '6000' },
    'max-polls-per-order': { type: 'string', default: '1.5' },
    'max-floor-ratio': { type: 'string', default: '1.5' },
  },
});
const N = Number(flags.orders);
const rateLimit = Number(flags['rate-limit']);
const windowMs = Number(flags['window-ms']);
const timeScale = Number(flags['time-scale']);
const everyMs = Number(flags['every-ms']);
const maxPollsPerOrder = Number(flags['max-polls-per-order']);
const maxFloorRatio = Number(flags['max-floor-ratio']);

// The production proportions, scaled: a third of the limit kept for creation, a margin of 1/60
// of the window (1 s of 60 s).
const reservedForCreate = Math.round(rateLimit / 3);
const marginMs = Math.round(windowMs / 60);
// The longest timeline is two steps of 2 s × timeScale; the first poll comes after it, and a
// poll that still finds an order moving waits as long again.
const timelineMs = 2 * 2000 * timeScale;
const firstPollDelayMs = Math.round(timelineMs * 1.5);
const SUFFIXES = ['0001', '0002', '0003', '0004', '0005', '0006'];
const PRODUCT_PRICE = 19_500;

const seconds = (ms: number) => (ms / 1000).toFixed(1);

async function main(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'h2h-bench-reconcile-'));
  const redisServer = await startRedisServer();
  const fixture = JSON.parse(readFileSync('fixtures/demo.json', 'utf8')) as {
    members: Array<{ member_id: string; api_key: string; webhook_url: string | null }>;
  };
  for (const member of fixture.members) member.webhook_url = 'http://127.0.0.1:1/webhooks';
  // Count the simulator's answers by status from its request log: any 429 fails the run.
  const statuses = new Map<number, number>();
  const simLog = createLogger({
    name: 'sim',
    level: 'info',
    destination: new Writable({
      write(chunk, _encoding, done) {
        for (const line of chunk.toString().split('\n')) {
          const status = /"statusCode":(\d+)/.exec(line)?.[1];
          if (status && line.includes('request completed')) {
            statuses.set(Number(status), (statuses.get(Number(status)) ?? 0) + 1);
          }
        }
        done();
      },
    }),
  });
  const sim = await createSimulator({
    fixture: fixture as never,
    timeScale,
    rateLimit,
    rateWindowMs: windowMs,
    logger: simLog,
  });
  const control = async (path: string, body?: unknown) => {
    const res = await request(`${sim.origin}/__sim${path}`, {
      method: body === undefined ? 'GET' : path.startsWith('/members') ? 'PATCH' : 'POST',
      ...(body === undefined
        ? {}
        : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
    });
    return res.body.json();
  };
  await control('/faults', { webhook_drop: 1 });
  await control('/members/M-0001', { balance: N * PRODUCT_PRICE * 2 });
  const apiKey = fixture.members.find((m) => m.member_id === 'M-0001')!.api_key;

  const redis = new Redis(redisServer.url, { maxRetriesPerRequest: 1 });
  const budget = new RateBudget({ redis, apiKey, limit: rateLimit, windowMs, marginMs, reservedForCreate });
  const client = new UpstreamClient({ baseUrl: sim.baseUrl, apiKey, budget, budgetMaxWaitMs: 4 * windowMs });
  const settings = {
    ...reconcilerSettings(loadConfig({})),
    everyMs,
    firstPollDelayMs,
    backoffMs: [2, 4, 10, 20, 60].map((factor) => factor * firstPollDelayMs),
  };
  const store = withClaims(await openStore(sqliteUrl(join(dir, 'bench.db')), { role: 'bench' }), settings);
  const reconciler = await startReconciler({
    settings,
    store,
    client,
    budget,
    redisUrl: redisServer.url,
    logger: createLogger({ name: 'reconciler', level: 'warn', destination: process.stderr }),
  });

  const pollsSoFar = async () =>
    (await reconciler.metrics.registry.getSingleMetric('h2h_reconcile_polls_total')!.get()).values.reduce(
      (sum, v) => sum + v.value,
      0,
    );

  console.log(
    `placing ${N} orders (webhooks all dropped); budget ${rateLimit} per ${windowMs} ms + ${marginMs} ms margin, ` +
      `${reservedForCreate} kept for creation; timelines ≤ ${timelineMs} ms, first poll after ${firstPollDelayMs} ms`,
  );
  const started = Date.now();
  const refs: string[] = [];
  let next = 0;
  const placeNext = async (): Promise<void> => {
    while (next < N) {
      const i = next++;
      const result = await placeOrder(
        { client, store },
        {
          productCode: 'MLBB-86',
          data: { user_id: `1234${SUFFIXES[i % SUFFIXES.length]}`, server_id: '2001' },
          partnerRef: `bench-${String(i).padStart(5, '0')}`,
        },
      );
      if (result.outcome !== 'accepted') throw new Error(`order ${i} was not accepted: ${result.outcome}`);
      refs.push(result.order.partnerRef);
    }
  };
  await Promise.all(Array.from({ length: 10 }, placeNext));
  const placed = Date.now();
  const pollsDuringPlacement = await pollsSoFar();
  console.log(
    `placed in ${seconds(placed - started)} s (${pollsDuringPlacement} polls meanwhile); converging…`,
  );

  let converged: number | undefined;
  let lastReport = 0;
  const deadline = placed + 10 * 60_000;
  while (Date.now() < deadline) {
    const truth = (await control('/orders')) as Order[];
    let open = 0;
    for (const upstream of truth) {
      const local = await store.queries.getOrder(upstream.partner_ref);
      if (
        !local ||
        local.nextPollAt !== null ||
        local.upstreamStatus !== upstream.status ||
        local.serialNumber !== upstream.serial_number ||
        local.successAt !== upstream.success_at
      )
        open += 1;
    }
    if (open === 0 && truth.length === N) {
      converged = Date.now();
      break;
    }
    if (Date.now() - lastReport > 5000) {
      lastReport = Date.now();
      console.log(
        `  ${seconds(Date.now() - placed)} s: ${N - open}/${N} converged, ${await pollsSoFar()} polls`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  const polls = await pollsSoFar();
  const auditReads = (
    await reconciler.metrics.registry.getSingleMetric('h2h_reconcile_audit_reads_total')!.get()
  ).values.reduce((sum, v) => sum + v.value, 0);
  const pollCeiling = budget.ceilingFor('poll');
  const floorMs = (N / pollCeiling) * (windowMs + marginMs);
  const convergeMs = (converged ?? Date.now()) - placed;
  const pollsPerOrder = polls / N;
  const ratio = convergeMs / floorMs;
  const tooMany = statuses.get(429) ?? 0;

  await reconciler.close();
  await client.close();
  redis.disconnect();
  await store.close();
  await sim.close();
  await redisServer.stop();
  rmSync(dir, { recursive: true, force: true });

  const [load1, load5] = loadavg();
  const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'}, Node ${process.version}`;
  console.log('');
  console.log(`orders                  ${N}`);
  console.log(
    `polls                   ${polls} (${pollsPerOrder.toFixed(2)} per order; goal ≤ ${maxPollsPerOrder})`,
  );
  console.log(`audit reads             ${auditReads} (idle budget only; not counted as polls)`);
  console.log(`placement               ${seconds(placed - started)} s`);
  console.log(
    `convergence             ${seconds(convergeMs)} s after the last order was placed${converged ? '' : ' (NOT converged)'}`,
  );
  console.log(
    `floor                   ${seconds(floorMs)} s (${N} polls at ${pollCeiling} per ${windowMs + marginMs} ms)`,
  );
  console.log(`convergence / floor     ${ratio.toFixed(2)} (goal ≤ ${maxFloorRatio})`);
  console.log(`429 answers             ${tooMany}`);
  console.log(`machine                 ${machine}; load average ${load1?.toFixed(2)} / ${load5?.toFixed(2)}`);
  console.log('');
  console.log(
    `| ${new Date().toISOString().slice(0, 10)} | ${N} | ${rateLimit} per ${windowMs / 1000} s | ${polls} (**${pollsPerOrder.toFixed(2)}**/order) | ` +
      `${seconds(convergeMs)} s | ${seconds(floorMs)} s | **${ratio.toFixed(2)}×** | ${tooMany} | ${load1?.toFixed(2)} |`,
  );

  const failures = [
    !converged && 'not every order converged',
    pollsPerOrder > maxPollsPerOrder && `${pollsPerOrder.toFixed(2)} polls per order > ${maxPollsPerOrder}`,
    ratio > maxFloorRatio && `convergence ${ratio.toFixed(2)} × the floor > ${maxFloorRatio}`,
    tooMany > 0 && `${tooMany} answers 429`,
  ].filter(Boolean);
  for (const failure of failures) console.error(`FAILED: ${failure}`);
  return failures.length === 0 ? 0 : 1;
}

process.exitCode = await main();
