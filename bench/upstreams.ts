/**
 * Several upstreams (issue 28): what N upstream accounts buy in throughput. One upstream's rate
 * budget (60 calls a minute) is the ceiling of a reseller's business; with N accounts routed by
 * the shop API's router, orders per minute should grow N-fold while each order still costs what
 * it cost on one. Run as `npm run bench:economics -- --upstreams N` (economics.ts hands over to
 * this file for N > 1) or `npm run bench:upstreams`:
 *
 *   npm run bench:economics -- --upstreams 3 [--minutes 6] [--warmup-min 1] [--load 1.3]
 *     [--scale 5] [--p 0.02] [--margin-ms 1000] [--tail-min 20] [--seed 1]
 *
 * Two runs in one process, one after the other, each on fresh parts: one upstream, then N. Each
 * upstream is a simulator on the realistic profile (the demo fixture; upstream i's member key
 * and secret its own) with its own rate limit (60 per simulated minute), and h2h-sync runs as the
 * worker and the shop API do: an upstreams file (N > 1), per upstream its client, rate budget
 * (keyed by its key), reconciler and submission pump (`withClaims(store, settings, name)`), its
 * catalog synced; one receiver (each upstream's webhooks on its own path) and the event worker;
 * the router (`createRouter`, as the shop API builds it) and `acceptOrder` for every order.
 *
 * Orders arrive as a Poisson process at `--load` × N × 60 per simulated minute (above what the N
 * budgets can place, so their queues grow and throughput is the budgets'), for `--warmup-min`
 * and then `--minutes`. Measured over the minutes after the warm-up: orders the upstreams
 * created per simulated minute (every attempt is an order its upstream took, with one create of
 * its budget; the shop's orders whose first attempt was created are printed beside it). Then the
 * pumps stop (the backlog stays queued, never sent) and the run waits until every sent order
 * equals its upstream's state (at most `--tail-min`), for the calls per order: every member-API
 * call after the catalog syncs (creates, polls, probes) but the audit's reads, against the floor
 * of one create per order plus one poll per final webhook lost (`--p`, `webhook_drop_final`).
 *
 * Scaled by one factor (`--scale`, simulated seconds per real second), as economics.ts does: the
 * simulators' time and rate window, the budgets' window, the pass interval and every reconciler
 * delay, and the routing's H2H_ROUTING_MAX_WAIT_S. The default 5 (not economics' 120) keeps the
 * window at 12 s: each pump sends one order at a time (a claim, the create, its answer's apply),
 * and that cycle must stay under the 200 ms a create slot lasts here (1 s in production) on a
 * loaded 2-core machine that runs all of it in this one process, or the run measures this
 * machine instead of the budgets. Each upstream's line says which it was: its budget's use, and
 * per minute its polls, the simulated seconds its pump waited for a create slot (about 60 when
 * the budget is the bound) and the pump's longest gap between two creates. Not scaled: the budget's margin (`--margin-ms`, production's 1 s),
 * since what it absorbs, the delay between a grant in Redis and the request's arrival upstream,
 * is real time; it costs each budget the same share in both runs. About 3.5 minutes.
 *
 * Exits 1 when a goal is missed: N upstreams' sustained orders per minute below 2.8 × one's with
 * 3 upstreams (in proportion for another N: 2.8 / 3 × N), calls
 * per order above 1.15 × the floor (either run), a 429 on any upstream, or a sent order that did
 * not converge.
 */

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import { request } from 'undici';
import { syncCatalog } from '../src/catalog/catalog-sync.js';
import {
  accountSettings,
  budgetSettings,
  loadConfig,
  receiverSettings,
  reconcilerSettings,
  routingSettings,
  workerSettings,
} from '../src/config/config.js';
import { startRedisServer } from '../src/dev/redis-server.js';
import { acceptOrder } from '../src/orders/accept-order.js';
import { type SubmissionPump, startSubmissionPump } from '../src/orders/submission-pump.js';
import { type AcquireOptions, type BudgetPriority, RateBudget } from '../src/rate-budget/rate-budget.js';
import { startReceiver } from '../src/receiver/server.js';
import { type RunningReconciler, startReconciler } from '../src/reconciler/reconciler.js';
import { createRouter } from '../src/routing/router.js';
import { connectRedis } from '../src/shared/redis-connection.js';
import { startSimulatedUpstreams } from '../src/simulator/simulated-upstreams.js';
import { openStore } from '../src/store/open-store.js';
import { withClaims } from '../src/store/order-store.js';
import { UpstreamClient } from '../src/upstream/client.js';
import type { Order } from '../src/upstream/model.js';
import { DEFAULT_UPSTREAM } from '../src/upstream/model.js';
import { accountVariables } from '../src/upstream/upstreams.js';
import { createEventWorker } from '../src/worker/event-worker.js';
import { benchStore } from './bench-store.js';

const { values: flags } = parseArgs({
  options: {
    upstreams: { type: 'string', default: '3' },
    minutes: { type: 'string', default: '6' },
    'warmup-min': { type: 'string', default: '1' },
    load: { type: 'string', default: '1.3' },
    scale: { type: 'string', default: '5' },
    p: { type: 'string', default: '0.02' },
    'margin-ms': { type: 'string', default: '1000' },
    'tail-min': { type: 'string', default: '20' },
    seed: { type: 'string', default: '1' },
  },
});

const num = (name: keyof typeof flags): number => {
  const value = flags[name];
  const n = Number(value);
  if (value === undefined || !Number.isFinite(n) || n < 0) {
    console.error(`--${name} must be a number ≥ 0, got ${String(value)}`);
    process.exit(2);
  }
  return n;
};

const UPSTREAMS = num('upstreams');
const MINUTES = num('minutes');
const WARMUP_MIN = num('warmup-min');
const LOAD = num('load');
const SPEED = num('scale');
const TIME_SCALE = 1 / SPEED;
const P = num('p');
const MIN_MARGIN_MS = num('margin-ms');
const TAIL_MIN = num('tail-min');
const SEED = num('seed');
if (!Number.isInteger(UPSTREAMS) || UPSTREAMS < 2) {
  console.error(`--upstreams must be a whole number ≥ 2 (1 is economics.ts' day), got ${UPSTREAMS}`);
  process.exit(2);
}

/** The goals (issue 28): 2.8 × one upstream's orders per minute with 3, in proportion with N. */
const MIN_RATIO = (2.8 / 3) * UPSTREAMS;
const MAX_X_FLOOR = 1.15;

const RATE_LIMIT = 60;
const RATE_WINDOW_MS = 60_000;
const PRODUCT = 'MLBB-86';
const PRODUCTION = reconcilerSettings(loadConfig({}));

/** Timelines by user_id suffix (docs/simulator.md), economics.ts' mix. */
const MIX: ReadonlyArray<{ suffix: string; share: number }> = [
  { suffix: '0001', share: 0.85 }, // PENDING → SUCCESS with serial
  { suffix: '0003', share: 0.1 }, // PENDING → PROCESSING → SUCCESS
  { suffix: '0002', share: 0.05 }, // PENDING → FAILED
];

/** Records each create slot's wait (the pump's time bound by the budget). */
class TimedRateBudget extends RateBudget {
  readonly createWaits: Array<{ at: number; waitedMs: number }> = [];
  override async acquire(priority: BudgetPriority, options?: AcquireOptions): Promise<void> {
    const started = Date.now();
    await super.acquire(priority, options);
    if (priority === 'create') this.createWaits.push({ at: started, waitedMs: Date.now() - started });
  }
}

/** Records each create's whole time (its slot's wait, the request, any retry). */
class TimedClient extends UpstreamClient {
  readonly creates: Array<{ at: number; tookMs: number }> = [];
  override async createOrder(...args: Parameters<UpstreamClient['createOrder']>) {
    const started = Date.now();
    try {
      return await super.createOrder(...args);
    } finally {
      this.creates.push({ at: started, tookMs: Date.now() - started });
    }
  }
}

function random(seed: number): () => number {
  const generator = xoroshiro128plus(seed);
  return () => uniformFloat64(generator);
}

const scaled = (ms: number) => Math.round(ms * TIME_SCALE);
const simMin = (realMs: number) => realMs / TIME_SCALE / 60_000;

/** One upstream's part of a run. */
interface UpstreamFigures {
  name: string;
  /** Orders it created in the measured minutes, and per simulated minute of them. */
  created: number;
  perMinute: number[];
  /** Member-API calls after the catalog sync, but the audit's reads. */
  calls: number;
  auditReads: number;
  ordersTotal: number;
  lostFinals: number;
  tooMany: number;
  /** When the 429s came, in simulated minutes from the first arrival. */
  tooManyAtMin: number[];
  /** Its budget's use (grants in the window ÷ limit), sampled every half window of the measured minutes: mean. */
  budgetUse: { all: number; create: number; poll: number };
  /** Its submission queue's length at each sample (every half window of the measured minutes). */
  queued: number[];
  /** What its pump sent, by outcome. */
  sent: SubmissionPump['sent'];
  /** Per measured minute: its reads (polls, GET /orders/:ref), and the simulated seconds its creates waited for a slot. */
  readsPerMinute: number[];
  gaps: { longestCreateMs: number; top: Array<{ atMin: number; gapMs: number }> };
  slotWaitPerMinute: number[];
  /** Orders it was routed (first attempts), and later attempts queued on it. */
  routedFirst: number;
}

interface RunResult {
  n: number;
  offeredPerMin: number;
  arrived: number;
  refused: number;
  upstreams: UpstreamFigures[];
  /** Orders created per simulated minute over the measured minutes, every upstream together. */
  sustainedPerMin: number;
  /** The least of the measured minutes, every upstream together. */
  worstMinute: number;
  /** Shop orders whose first attempt was created in the measured minutes, per minute. */
  shopPerMin: number;
  /** Every order sent, every call, and the floor (1 + lost finals per order). */
  orders: number;
  calls: number;
  floor: number;
  callsPerOrder: number;
  /** Shop orders left queued, never sent, when the pumps stopped. */
  leftQueued: number;
  notConverged: number;
  differing: string[];
  realSeconds: number;
  load: [number, number];
  /** This process's event loop delay over the measured minutes, ms (a starved process stalls its calls). */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  /** This process's CPU over the measured minutes, share of one core. */
  cpu: number;
}

async function run(n: number): Promise<RunResult> {
  const runStarted = Date.now();
  const dir = mkdtempSync(join(tmpdir(), 'h2h-bench-upstreams-'));
  const stops: Array<() => unknown> = [() => rmSync(dir, { recursive: true, force: true })];
  try {
    const redisServer = await startRedisServer({ dir: join(dir, 'redis') });
    stops.push(() => redisServer.stop());

    // Each upstream: the demo fixture, its member M-0001's key and secret made its own.
    const demo = readFileSync('fixtures/demo.json', 'utf8');
    const names = Array.from({ length: n }, (_, i) => (i === 0 ? DEFAULT_UPSTREAM : `up-${i + 1}`));
    const fixtures = names.map((name) => {
      const fixture = JSON.parse(demo) as {
        members: Array<{ member_id: string; api_key: string; api_secret: string }>;
      };
      const member = fixture.members.find((m) => m.member_id === 'M-0001')!;
      if (name !== DEFAULT_UPSTREAM) {
        member.api_key += `_${name}`;
        member.api_secret += `_${name}`;
      }
      return { fixture, member };
    });
    // Each simulator's member-API calls (creation times from its orders), reads by ref, 429s.
    const traffic = names.map(() => ({
      calls: 0,
      tooMany: [] as number[],
      baseline: 0,
      reads: [] as number[],
    }));
    const logOf = (i: number) =>
      pino(
        { level: 'info' },
        new Writable({
          write(chunk, _encoding, done) {
            for (const line of chunk.toString().split('\n')) {
              if (line.includes('incoming request') && line.includes('/v1/member-api')) {
                traffic[i]!.calls++;
                if (line.includes('"method":"GET","url":"/v1/member-api/orders/'))
                  traffic[i]!.reads.push(Date.now());
              }
              if (line.includes('request completed') && line.includes('"statusCode":429'))
                traffic[i]!.tooMany.push(Date.now());
            }
            done();
          },
        }),
      );
    const sims = await startSimulatedUpstreams(
      names.map((name, i) => ({
        name,
        fixture: fixtures[i]!.fixture as never,
        profile: 'realistic' as const,
        speed: SPEED,
        scaleRateWindow: true,
        seed: SEED + i,
        rateLimit: RATE_LIMIT,
        rateWindowMs: RATE_WINDOW_MS,
        logger: logOf(i),
      })),
    );
    stops.push(() => sims.close());
    const control = async (name: string, method: 'GET' | 'POST' | 'PATCH', path: string, body?: unknown) => {
      const answer = await request(`${sims.get(name).origin}/__sim${path}`, {
        method,
        ...(body === undefined
          ? {}
          : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
      });
      const text = await answer.body.text();
      if (answer.statusCode !== 200)
        throw new Error(`simulator ${name} ${method} ${path}: ${answer.statusCode} ${text}`);
      return JSON.parse(text) as unknown;
    };

    const upstreamsFile = join(dir, 'upstreams.json');
    writeFileSync(
      upstreamsFile,
      JSON.stringify({
        upstreams: names.map((name) =>
          name === DEFAULT_UPSTREAM ? { name } : { name, base_url: sims.get(name).baseUrl },
        ),
      }),
    );
    const keys: Record<string, string> = {};
    names.forEach((name, i) => {
      if (name === DEFAULT_UPSTREAM) return;
      const variables = accountVariables(name);
      keys[variables.apiKey] = fixtures[i]!.member.api_key;
      keys[variables.secret] = fixtures[i]!.member.api_secret;
    });
    const config = loadConfig({
      H2H_BASE_URL: sims.get(DEFAULT_UPSTREAM).baseUrl,
      H2H_API_KEY: fixtures[0]!.member.api_key,
      H2H_API_SECRET: fixtures[0]!.member.api_secret,
      ...(n > 1 ? { H2H_UPSTREAMS_FILE: upstreamsFile, ...keys } : {}),
      REDIS_URL: redisServer.url,
      H2H_DB_PATH: join(dir, 'h2h-sync.db'),
      PORT: '0',
      H2H_RECEIVER_METRICS_PORT: '0',
      LOG_LEVEL: 'silent',
    });

    const windowMs = RATE_WINDOW_MS * TIME_SCALE;
    const marginMs = Math.max(1000 * TIME_SCALE, MIN_MARGIN_MS);
    const settings = {
      ...PRODUCTION,
      everyMs: Math.max(1, scaled(PRODUCTION.everyMs)),
      firstPollDelayMs: scaled(PRODUCTION.firstPollDelayMs),
      firstPollMinMs: scaled(PRODUCTION.firstPollMinMs),
      firstPollMaxMs: scaled(PRODUCTION.firstPollMaxMs),
      backoffMs: PRODUCTION.backoffMs.map(scaled),
      stuckAfterMs: scaled(PRODUCTION.stuckAfterMs),
      leaseMs: scaled(PRODUCTION.leaseMs),
      auditEveryMs: scaled(PRODUCTION.auditEveryMs),
      auditWindowMs: scaled(PRODUCTION.auditWindowMs),
    };
    const storeAt = await benchStore('sqlite', dir);
    stops.push(() => storeAt.stop());
    const store = await openStore(storeAt.url, { role: 'bench' });
    stops.push(() => store.close());

    const worker = workerSettings(config);
    const eventWorker = createEventWorker({
      writer: store.writer,
      redisUrl: redisServer.url,
      concurrency: worker.concurrency,
      maxBatchSize: worker.batchSize,
      lockDurationMs: worker.lockDurationMs,
      stalledIntervalMs: worker.stalledIntervalMs,
      maxStalledCount: worker.maxStalledCount,
      storeLockWaitMs: worker.storeLockWaitMs,
    });
    stops.push(() => eventWorker.close({ timeoutMs: 5000 }));
    await eventWorker.waitUntilReady();
    const receiver = await startReceiver(receiverSettings(config), { logger: pino({ level: 'silent' }) });
    stops.push(() => receiver.close());

    // Each upstream as the worker process runs it (worker/server.ts, startUpstreamEngine), with
    // the budget's window and margin scaled.
    const registry = new Registry();
    const reconcilers: RunningReconciler[] = [];
    const budgets: TimedRateBudget[] = [];
    const clients: TimedClient[] = [];
    const pumps: SubmissionPump[] = [];
    const warn = pino({ level: 'warn' }, process.stderr);
    for (const [i, account] of config.upstreams.entries()) {
      const name = account.name;
      const redis = await connectRedis(redisServer.url, { reconnect: true, connectionName: 'h2h-budget' });
      stops.push(() => redis.disconnect());
      const budget = new TimedRateBudget({
        redis,
        apiKey: account.apiKey!,
        ...budgetSettings(config, account.rateLimit),
        windowMs,
        marginMs,
      });
      budgets.push(budget);
      const callSettings = accountSettings(config, account);
      const client = new TimedClient({
        ...callSettings,
        retry: { maxAttempts: callSettings.retryMaxAttempts },
        budget,
        budgetMaxWaitMs: 60 * windowMs,
        rateWindowMs: windowMs,
      });
      stops.push(() => client.close());
      clients.push(client);
      const claiming = withClaims(store, settings, name);
      const reconciler = await startReconciler({
        settings,
        store: claiming,
        client,
        budget,
        redisUrl: redisServer.url,
        registry,
        takePollRequests: false,
        logger: warn.child({ upstream: name }),
      });
      stops.push(() => reconciler.close());
      reconcilers.push(reconciler);

      const webhookUrl = name === DEFAULT_UPSTREAM ? receiver.webhookUrl : `${receiver.webhookUrl}/${name}`;
      await control(name, 'POST', '/faults', { webhook_drop_final: P });
      await control(name, 'PATCH', '/members/M-0001', { webhook_url: webhookUrl, balance: 1e12 });
      await syncCatalog({ store, upstream: name, client });
      traffic[i]!.baseline = traffic[i]!.calls;
      pumps.push(startSubmissionPump({ store: claiming, client, logger: warn.child({ upstream: name }) }));
    }
    stops.push(() => Promise.all(pumps.map((pump) => pump.stop())));

    const routing = routingSettings(config);
    const router = createRouter(store, config.upstreams, {
      policy: routing.policy,
      maxQueueWaitMs: scaled(routing.maxQueueWaitMs),
      rateWindowMs: windowMs,
    });

    // Arrivals: a Poisson process at LOAD × the N budgets' whole limit.
    const offeredPerMin = LOAD * n * RATE_LIMIT * (60_000 / RATE_WINDOW_MS);
    const warmupMs = WARMUP_MIN * 60_000;
    const endMs = warmupMs + MINUTES * 60_000;
    const draw = random(SEED * 7919 + 1);
    const arrivals: number[] = [];
    for (let t = 0; ; ) {
      t += -Math.log(1 - draw()) / (offeredPerMin / 60_000);
      if (t >= endMs) break;
      arrivals.push(t);
    }
    const suffixOf = () => {
      let u = draw();
      for (const { suffix, share } of MIX) {
        u -= share;
        if (u < 0) return suffix;
      }
      return MIX[0]!.suffix;
    };
    const started = Date.now();
    const realAt = (simMs: number) => started + simMs * TIME_SCALE;
    const sleepUntil = (at: number) =>
      new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())));
    const accepted: Array<Promise<void>> = [];
    // The budgets' use and this process's health over the measured minutes.
    const uses: Array<Array<{ all: number; create: number; poll: number }>> = budgets.map(() => []);
    const queued: number[][] = budgets.map(() => []);
    const loop = monitorEventLoopDelay({ resolution: 10 });
    let cpuFrom: NodeJS.CpuUsage | undefined;
    const measuring = setTimeout(() => {
      loop.enable();
      cpuFrom = process.cpuUsage();
    }, warmupMs * TIME_SCALE);
    const sampler = setInterval(() => {
      if (Date.now() < realAt(warmupMs) || Date.now() >= realAt(endMs)) return;
      names.forEach((name, i) => {
        void store.queries.countQueuedOn(name).then(
          (q) => queued[i]!.push(q),
          () => {},
        );
      });
      budgets.forEach((budget, i) => {
        void budget.used().then(
          (u) => uses[i]!.push({ all: u.used / u.limit, create: u.create / u.limit, poll: u.poll / u.limit }),
          () => {},
        );
      });
    }, windowMs / 2);
    stops.push(() => {
      clearTimeout(measuring);
      clearInterval(sampler);
      loop.disable();
    });
    let refused = 0;
    let firstRefusal: unknown;
    for (const [i, at] of arrivals.entries()) {
      await sleepUntil(realAt(at));
      accepted.push(
        acceptOrder(
          store,
          `up-${String(i).padStart(6, '0')}`,
          { product_code: PRODUCT, data: { user_id: `${1_000_000 + i}${suffixOf()}`, server_id: '2001' } },
          { ...(router ? { router } : {}), submissionBacklog: 1_000_000, retryAfterS: 1 },
        ).then(
          () => {},
          (error: unknown) => {
            refused++;
            firstRefusal ??= error;
          },
        ),
      );
    }
    await sleepUntil(realAt(endMs));
    await Promise.all(accepted);
    // The measured minutes end here: the backlog stays queued, never sent.
    const measuredTo = realAt(endMs);
    const cpu = cpuFrom ? process.cpuUsage(cpuFrom) : { user: 0, system: 0 };
    const cpuShare = (cpu.user + cpu.system) / 1000 / (Date.now() - realAt(warmupMs));
    loop.disable();
    clearInterval(sampler);
    await Promise.all(pumps.map((pump) => pump.stop()));
    if (firstRefusal) console.error('first refused order:', firstRefusal);

    // The tail: until every sent order equals its upstream's state (every final webhook lost
    // polled), or --tail-min simulated minutes.
    const tailEnd = Date.now() + TAIL_MIN * 60_000 * TIME_SCALE;
    const truth = async () =>
      Promise.all(
        names.map(async (name) => ({ name, orders: (await control(name, 'GET', '/orders')) as Order[] })),
      );
    let differing: string[] = [];
    let notConverged = Number.POSITIVE_INFINITY;
    let upstreamOrders = await truth();
    for (;;) {
      upstreamOrders = await truth();
      differing = [];
      notConverged = 0;
      for (const { name, orders } of upstreamOrders) {
        for (const o of orders) {
          const local = await store.queries.getOrder(o.partner_ref);
          // An ended attempt (the order went on to another upstream) ended FAILED there.
          const ended = !local || local.partnerRef !== o.partner_ref || local.upstream !== name;
          if (ended ? o.status === 'FAILED' : local.status === o.status) continue;
          notConverged++;
          if (differing.length < 5)
            differing.push(
              `${name} ${o.partner_ref}: upstream ${o.status}, local ${local?.status ?? 'missing'}`,
            );
        }
      }
      if (notConverged === 0 || Date.now() > tailEnd) break;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }

    const audit = await registry.getSingleMetric('h2h_reconcile_audit_reads_total')?.get();
    const auditOf = (name: string) =>
      (audit?.values ?? []).filter((v) => v.labels.upstream === name).reduce((sum, v) => sum + v.value, 0);
    const from = realAt(warmupMs);
    const minutes = Math.max(1, Math.round(MINUTES));
    const webhookLog = await Promise.all(
      names.map(async (name) => {
        const attempts = (await control(name, 'GET', '/webhooks')) as Array<{
          partner_ref: string;
          final: boolean;
          error: string | null;
          faults: string[];
        }>;
        return new Set(
          attempts
            .filter((a) => a.final && a.error === 'dropped' && !a.faults.includes('planned_loss'))
            .map((a) => a.partner_ref),
        ).size;
      }),
    );
    /** Sums per measured minute. */
    const bucket = (events: Array<{ at: number; value: number }>) => {
      const sums = Array.from({ length: minutes }, () => 0);
      for (const { at, value } of events) {
        const m = Math.floor(simMin(at - from) / (MINUTES / minutes));
        if (at >= from && m < minutes) sums[m]! += value;
      }
      return sums.map((x) => Math.round(x));
    };
    const routedFirst = new Map<string, number>();
    const firstCreated: number[] = [];
    const figures: UpstreamFigures[] = upstreamOrders.map(({ name, orders }, i) => {
      const created = orders
        .map((o) => Date.parse(o.created_at))
        .filter((at) => at >= from && at < measuredTo);
      const perMinute = Array.from({ length: minutes }, () => 0);
      for (const at of created) {
        const m = Math.floor(simMin(at - from) / (MINUTES / minutes));
        if (m < minutes) perMinute[m]! += 1;
      }
      for (const o of orders) {
        if (!o.partner_ref.includes('~')) {
          routedFirst.set(name, (routedFirst.get(name) ?? 0) + 1);
          firstCreated.push(Date.parse(o.created_at));
        }
      }
      const auditReads = auditOf(name);
      return {
        name,
        created: created.length,
        perMinute,
        calls: traffic[i]!.calls - traffic[i]!.baseline - auditReads,
        auditReads,
        ordersTotal: orders.length,
        queued: queued[i]!,
        sent: pumps[i]!.sent,
        gaps: (() => {
          // The pump's longest times between one create's end and the next one's start: its own
          // cycle (claim, the answer's apply, release), in real ms, and when (simulated minute).
          const cs = clients[i]!.creates.filter((c) => c.at >= from && c.at < measuredTo);
          const gaps = cs.slice(1).map((c, k) => ({
            atMin: Math.round(simMin(c.at - from) * 10) / 10,
            gapMs: c.at - (cs[k]!.at + cs[k]!.tookMs),
          }));
          const longest = cs.reduce((m, c) => Math.max(m, c.tookMs), 0);
          return {
            longestCreateMs: longest,
            top: gaps.sort((a, b) => b.gapMs - a.gapMs).slice(0, 3),
          };
        })(),
        readsPerMinute: bucket(traffic[i]!.reads.map((at) => ({ at, value: 1 }))),
        slotWaitPerMinute: bucket(
          budgets[i]!.createWaits.map((w) => ({ at: w.at, value: (w.waitedMs * SPEED) / 1000 })),
        ),
        lostFinals: webhookLog[i]!,
        tooMany: traffic[i]!.tooMany.length,
        tooManyAtMin: traffic[i]!.tooMany.map((at) => Math.round(simMin(at - started) * 10) / 10),
        budgetUse: (['all', 'create', 'poll'] as const).reduce(
          (use, key) => {
            use[key] = uses[i]!.reduce((sum, u) => sum + u[key], 0) / Math.max(1, uses[i]!.length);
            return use;
          },
          { all: 0, create: 0, poll: 0 },
        ),
        routedFirst: routedFirst.get(name) ?? 0,
      };
    });
    const leftQueued = Number(
      (
        await store.db.get<{ n: number }>(
          `SELECT COUNT(*) AS n FROM orders WHERE submission_state = 'queued'`,
          {},
        )
      )?.n ?? 0,
    );
    const orders = figures.reduce((sum, f) => sum + f.ordersTotal, 0);
    const calls = figures.reduce((sum, f) => sum + f.calls, 0);
    const lost = figures.reduce((sum, f) => sum + f.lostFinals, 0);
    const totalPerMinute = Array.from({ length: minutes }, (_, m) =>
      figures.reduce((sum, f) => sum + f.perMinute[m]!, 0),
    );
    const floor = 1 + lost / orders;
    return {
      n,
      offeredPerMin,
      arrived: arrivals.length,
      refused,
      upstreams: figures,
      sustainedPerMin: figures.reduce((sum, f) => sum + f.created, 0) / MINUTES,
      worstMinute: Math.min(...totalPerMinute),
      shopPerMin: firstCreated.filter((at) => at >= from && at < measuredTo).length / MINUTES,
      orders,
      calls,
      floor,
      callsPerOrder: calls / orders,
      leftQueued,
      notConverged,
      differing,
      realSeconds: (Date.now() - runStarted) / 1000,
      load: [loadavg()[0]!, loadavg()[1]!],
      loopDelayP99Ms: loop.percentile(99) / 1e6,
      loopDelayMaxMs: loop.max / 1e6,
      cpu: cpuShare,
    };
  } finally {
    for (const stop of stops.reverse()) await Promise.resolve(stop()).catch(() => {});
  }
}

function printRun(r: RunResult): void {
  console.log(
    `\n== ${r.n} upstream${r.n === 1 ? '' : 's'}: ${r.arrived} orders offered at ${r.offeredPerMin.toFixed(0)}/min (${r.refused} refused), ` +
      `${r.realSeconds.toFixed(0)} s real, load average ${r.load[0].toFixed(2)} / ${r.load[1].toFixed(2)} at its end`,
  );
  console.log(
    `  sustained                  ${r.sustainedPerMin.toFixed(1)} orders created per minute (worst minute ${r.worstMinute}); ` +
      `shop orders first sent ${r.shopPerMin.toFixed(1)}/min; ${r.leftQueued} left queued when the pumps stopped`,
  );
  console.log(
    `  calls per order            ${r.callsPerOrder.toFixed(3)} (${r.calls} calls for ${r.orders} orders); floor ${r.floor.toFixed(3)}; ` +
      `${(r.callsPerOrder / r.floor).toFixed(3)} × floor`,
  );
  for (const u of r.upstreams) {
    console.log(
      `  ${u.name.padEnd(26)} ${(u.created / MINUTES).toFixed(1)}/min (per minute ${u.perMinute.join(' ')}); ` +
        `${u.ordersTotal} orders (${u.routedFirst} first attempts), ${u.calls} calls (+${u.auditReads} audit reads), ` +
        `${u.lostFinals} final webhooks lost, budget use ${(100 * u.budgetUse.all).toFixed(0)} % ` +
        `(creates ${(100 * u.budgetUse.create).toFixed(0)} %, polls ${(100 * u.budgetUse.poll).toFixed(0)} %), ` +
        `429: ${u.tooMany}${u.tooMany ? ` (at minute ${u.tooManyAtMin.join(', ')})` : ''}`,
    );
  }
  for (const u of r.upstreams) {
    console.log(
      `  ${u.name.padEnd(26)} queue ${u.queued.join(' ')}; pump sent ${JSON.stringify(u.sent)}; per minute: polls ${u.readsPerMinute.join(' ')}, ` +
        `s waiting for a create slot ${u.slotWaitPerMinute.join(' ')}; longest create ${u.gaps.longestCreateMs} ms real; ` +
        `longest gaps between creates ${u.gaps.top.map((g) => `${g.gapMs} ms at minute ${g.atMin}`).join(', ')}`,
    );
  }
  console.log(
    `  this process               event loop delay p99 ${r.loopDelayP99Ms.toFixed(0)} ms, max ${r.loopDelayMaxMs.toFixed(0)} ms; CPU ${(100 * r.cpu).toFixed(0)} % of a core (measured minutes)`,
  );
  if (r.notConverged > 0) {
    console.log(`  NOT converged: ${r.notConverged} orders differ from their upstream`);
    for (const d of r.differing) console.log(`    ${d}`);
  }
}

async function main(): Promise<number> {
  const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'}, Node ${process.version}`;
  console.log(
    `Several upstreams, time-scaled ${SPEED}× (1 real s = ${SPEED} simulated s; rate window ${(RATE_WINDOW_MS * TIME_SCALE).toFixed(0)} ms real, ` +
      `margin ${Math.max(1000 * TIME_SCALE, MIN_MARGIN_MS).toFixed(0)} ms): 1 upstream, then ${UPSTREAMS}, each ${RATE_LIMIT} calls per simulated minute; ` +
      `orders offered at ${LOAD} × the budgets' whole limit for ${WARMUP_MIN} + ${MINUTES} simulated minutes (measured: the last ${MINUTES}); ` +
      `realistic profile, final webhooks lost with p = ${P}. Figures are simulated time.`,
  );
  console.log(`machine: ${machine}; load average at start ${loadavg()[0]!.toFixed(2)}`);
  const one = await run(1);
  printRun(one);
  const many = await run(UPSTREAMS);
  printRun(many);

  const ratio = many.sustainedPerMin / one.sustainedPerMin;
  console.log(
    `\n| date | upstreams | offered/min | sustained orders/min | ratio (goal ≥ ${MIN_RATIO}) | shop orders/min | calls/order | floor | × floor (goal ≤ ${MAX_X_FLOOR}) | 429 per upstream | load (1/5 min) |`,
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of [one, many]) {
    console.log(
      `| ${new Date().toISOString().slice(0, 10)} | ${r.n} | ${r.offeredPerMin.toFixed(0)} | ${r.sustainedPerMin.toFixed(1)} | ` +
        `${r === one ? '1' : `**${ratio.toFixed(2)}**`} | ${r.shopPerMin.toFixed(1)} | ${r.callsPerOrder.toFixed(3)} | ${r.floor.toFixed(3)} | ` +
        `**${(r.callsPerOrder / r.floor).toFixed(3)}** | ${r.upstreams.map((u) => u.tooMany).join(' / ')} | ${r.load[0].toFixed(2)} / ${r.load[1].toFixed(2)} |`,
    );
  }

  const failures: string[] = [];
  if (!(ratio >= MIN_RATIO))
    failures.push(
      `${UPSTREAMS} upstreams sustained ${many.sustainedPerMin.toFixed(1)} orders per minute = ${ratio.toFixed(2)} × one upstream's ${one.sustainedPerMin.toFixed(1)} < ${MIN_RATIO}`,
    );
  for (const r of [one, many]) {
    const at = `${r.n} upstream${r.n === 1 ? '' : 's'}`;
    const x = r.callsPerOrder / r.floor;
    if (!(x <= MAX_X_FLOOR))
      failures.push(
        `${at}: ${r.callsPerOrder.toFixed(3)} calls per order = ${x.toFixed(3)} × the floor ${r.floor.toFixed(3)} > ${MAX_X_FLOOR}`,
      );
    for (const u of r.upstreams)
      if (u.tooMany > 0) failures.push(`${at}: ${u.tooMany} answers 429 on ${u.name}`);
    if (r.notConverged > 0) failures.push(`${at}: ${r.notConverged} sent orders did not converge`);
    if (r.refused > 0) failures.push(`${at}: ${r.refused} orders refused by acceptOrder`);
  }
  for (const failure of failures) console.error(`FAILED: ${failure}`);
  return failures.length === 0 ? 0 : 1;
}

process.exitCode = await main();
