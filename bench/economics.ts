/**
 * The economics of reconciliation (issue 12): a day in production, time-scaled. Orders arrive at
 * an average rate with a burst, complete on the simulator's realistic profile, lose their final
 * webhook with probability p, meet a receiver outage, and a few of them are refunded days after
 * success with every webhook lost. For each p it prints what the upstream calls bought against
 * the floor (one create per order plus one poll per lost final webhook), the wasted polls, how
 * stale lost-webhook orders stayed, how long orders waited for a budget slot in the burst, the
 * 429s, the refunds the audit found and its coverage; then the curve of the first poll's quantile
 * against calls per order and p99 staleness.
 *
 *   npm run bench:economics -- [--hours 1.5] [--rate 20] [--burst-min 5] [--burst-x 3]
 *     [--outage-min <20 × hours/24>] [--scale 120] [--p 0,0.02,0.25] [--quantile <default>]
 *     [--quantiles 0.5,0.8,0.9,0.95,0.99] [--curve-p 0.25] [--refunds 4] [--refund-after-days 2]
 *     [--audit-day-h 1] [--margin-ms 100] [--seed 1] [--oracle] [--poll-floors <default>] [--store sqlite]
 *
 * `--upstreams N` with N > 1 runs bench/upstreams.ts instead (issue 28: orders per minute with N
 * upstreams against one, side by side); `--upstreams 1` is this day.
 *
 * `--poll-floors 0,6` runs every p once per poll floor (H2H_RATE_POLL_FLOOR), side by side.
 * `--store sqlite|postgres|both` (default sqlite): the store the day runs on; `both` runs every p
 * on SQLite and then on a private PostgreSQL server, side by side.
 *
 * Everything runs in this process on real parts: the simulator over HTTP (realistic profile,
 * `speed` = --scale, rate window scaled), a private redis-server, a SQLite file, the receiver
 * (`startReceiver`) so webhooks really arrive, the event worker on the store, the shared rate
 * budget, and the reconciler (`startReconciler`). One factor scales all time: the simulator's
 * (status steps, webhook delays and retries, refunds), the rate window, the pass interval and
 * every reconciler delay (first poll and its bounds, backoff, stuck, lease, audit). Not scaled:
 * network timeouts and the client's retry pauses, the pace estimate's 5 s cache, the receiver
 * and the worker (all real time), and the budget's margin, which is at least --margin-ms: 1 s
 * scaled is 8 ms, less than the jitter between a grant and its request's arrival on a loaded
 * 2-core machine, and the simulator answers 429 when the jitter exceeds the margin.
 *
 * What is shortened, and why: the default day is 1.5 simulated hours (2 cores must run seven of
 * them in about 10 minutes), with the outage shortened in proportion (20 min per 24 h), so that
 * its share of the orders, and so its cost per order, stays that of a real day; the burst keeps
 * its 5 minutes at 3×. The audit works in days (once per order a day, a 7-day window) and the
 * refunds come days after success: a further compression (--audit-day-h, default one simulated
 * hour per audit day) lets them happen within the run.
 *
 * Upstream calls per order count every call but the audit's reads (creates, polls, probes);
 * the audit's reads use idle budget only and are reported apart. The first poll's quantile is
 * one parameter: it goes into the reconciler settings as `firstPollQuantile` (pace learning;
 * default the production one, 0 = the fixed first-poll delay). With --oracle there is no
 * learning: q stands for a fixed first-poll delay at the q-quantile of the profile's completion
 * distribution plus its median webhook delay, what learning should converge to.
 *
 * Exits 1 when a goal is missed: a 429, an order that did not converge, a late refund not found
 * within the audit window, calls per order above 1.15 × the floor at p = 0.02 or 1.10 × at
 * p = 0.25, or p99 staleness above the upstream's p99 completion + 2 pass intervals.
 */

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import { request } from 'undici';
import { loadConfig, receiverSettings, reconcilerSettings, workerSettings } from '../src/config/config.js';
import { startRedisServer } from '../src/dev/redis-server.js';
import { normalQuantile } from '../src/domain/normal.js';
import { placeOrder } from '../src/orders/place-order.js';
import { type AcquireOptions, type BudgetPriority, RateBudget } from '../src/rate-budget/rate-budget.js';
import { startReceiver } from '../src/receiver/server.js';
import { startReconciler } from '../src/reconciler/reconciler.js';
import { connectRedis } from '../src/shared/redis-connection.js';
import { createSimulator, REALISTIC_DEFAULTS } from '../src/simulator/index.js';
import { openStore } from '../src/store/open-store.js';
import { checkedAtSql } from '../src/store/order-claims.js';
import { withClaims } from '../src/store/order-store.js';
import { UpstreamClient } from '../src/upstream/client.js';
import { DEFAULT_UPSTREAM, type Order } from '../src/upstream/model.js';
import { createEventWorker } from '../src/worker/event-worker.js';
import { type BenchStoreKind, benchStore, benchStoreKinds } from './bench-store.js';

// `--upstreams N` (N > 1) is issue 28's throughput of several upstreams, another scenario with
// its own flags: bench/upstreams.ts runs it (one upstream and N side by side), and this day does
// not run. `--upstreams 1` (the default) is this day, unchanged.
const { upstreams: upstreamsFlag } = parseArgs({
  options: { upstreams: { type: 'string' } },
  strict: false,
  allowPositionals: true,
}).values;
if (upstreamsFlag !== undefined && Number(upstreamsFlag) !== 1) {
  await import('./upstreams.js');
  process.exit();
}

const { values: flags } = parseArgs({
  options: {
    upstreams: { type: 'string', default: '1' },
    hours: { type: 'string', default: '1.5' },
    rate: { type: 'string', default: '20' },
    'burst-min': { type: 'string', default: '5' },
    'burst-x': { type: 'string', default: '3' },
    'outage-min': { type: 'string' },
    scale: { type: 'string', default: '120' },
    p: { type: 'string', default: '0,0.02,0.25' },
    quantile: { type: 'string' },
    oracle: { type: 'boolean', default: false },
    quantiles: { type: 'string', default: '0.5,0.8,0.9,0.95,0.99' },
    'curve-p': { type: 'string', default: '0.25' },
    refunds: { type: 'string', default: '4' },
    'refund-after-days': { type: 'string', default: '2' },
    'audit-day-h': { type: 'string', default: '1' },
    'margin-ms': { type: 'string', default: '100' },
    seed: { type: 'string', default: '1' },
    'poll-floors': { type: 'string' },
    store: { type: 'string', default: 'sqlite' },
  },
});
const STORES = benchStoreKinds(flags.store);

const num = (name: keyof typeof flags, value = flags[name]): number => {
  const n = Number(value);
  if (value === undefined || !Number.isFinite(n) || n < 0) {
    console.error(`--${name} must be a number ≥ 0, got ${String(value)}`);
    process.exit(2);
  }
  return n;
};
const list = (name: 'p' | 'quantiles' | 'poll-floors') =>
  String(flags[name])
    .split(',')
    .filter((s) => s.trim() !== '')
    .map((s) => num(name, s.trim()));

const HOURS = num('hours');
const RATE_PER_MIN = num('rate');
const BURST_MIN = num('burst-min');
const BURST_X = num('burst-x');
const OUTAGE_MIN = flags['outage-min'] === undefined ? (20 * HOURS) / 24 : num('outage-min');
const SPEED = num('scale');
const TIME_SCALE = 1 / SPEED;
const P_VALUES = list('p');
const QUANTILES = list('quantiles');
const CURVE_P = num('curve-p');
const REFUNDS = num('refunds');
const REFUND_AFTER_DAYS = num('refund-after-days');
const AUDIT_DAY_MS = num('audit-day-h') * 3_600_000;
const MIN_MARGIN_MS = num('margin-ms');
const SEED = num('seed');

const ORACLE = flags.oracle === true;
const PRODUCTION = reconcilerSettings(loadConfig({}));
const DEFAULT_QUANTILE = flags.quantile === undefined ? PRODUCTION.firstPollQuantile : num('quantile');
const DEFAULT_POLL_FLOOR = loadConfig({}).budget.pollFloor;
const POLL_FLOORS = flags['poll-floors'] === undefined ? [DEFAULT_POLL_FLOOR] : list('poll-floors');

const RATE_LIMIT = 60;
const RATE_WINDOW_MS = 60_000;
const PRODUCT = 'MLBB-86';
const COMPLETION = REALISTIC_DEFAULTS.completion;
const WEBHOOK_DELAY = REALISTIC_DEFAULTS.webhook_delay;
const Z99 = 2.326_347_874;

/** Timelines by user_id suffix (docs/simulator.md): mostly plain successes. */
const MIX: ReadonlyArray<{ suffix: string; share: number }> = [
  { suffix: '0001', share: 0.85 }, // PENDING → SUCCESS with serial
  { suffix: '0003', share: 0.1 }, // PENDING → PROCESSING → SUCCESS
  { suffix: '0002', share: 0.05 }, // PENDING → FAILED
];

/** Seeded uniform [0, 1) (pure-rand, as the simulator draws), so arrivals repeat for one seed. */
function random(seed: number): () => number {
  const generator = xoroshiro128plus(seed);
  return () => uniformFloat64(generator);
}

/** The q-quantile of a log-normal given by its median and p99, in the same unit. */
function lognormalQuantile(dist: { median_s: number; p99_s: number }, q: number): number {
  const sigma = Math.log(dist.p99_s / dist.median_s) / Z99;
  return dist.median_s * Math.exp(sigma * normalQuantile(q));
}

function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

/** Count, p50, p99 and max of a sorted list of seconds (NaN when empty). */
interface Summary {
  n: number;
  p50: number;
  p99: number;
  max: number;
}
function summaryOf(sorted: number[]): Summary {
  return {
    n: sorted.length,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    max: sorted.at(-1) ?? Number.NaN,
  };
}

const simS = (realMs: number) => realMs / TIME_SCALE / 1000;
const fmtS = (s: number) =>
  Number.isNaN(s) ? '—' : s >= 120 ? `${(s / 60).toFixed(1)} min` : `${s.toFixed(1)} s`;

/** Rate budget that records how long each create waited for its slot (the one change: timing). */
class TimedRateBudget extends RateBudget {
  readonly createWaits: Array<{ at: number; waitedMs: number }> = [];
  override async acquire(priority: BudgetPriority, options?: AcquireOptions): Promise<void> {
    const started = Date.now();
    await super.acquire(priority, options);
    if (priority === 'create') this.createWaits.push({ at: started, waitedMs: Date.now() - started });
  }
}

interface RunResult {
  p: number;
  quantile: number;
  pollFloor: number;
  store: BenchStoreKind;
  firstPollDelayS: number;
  orders: number;
  calls: number;
  auditReads: number;
  lostFinals: number;
  floor: number;
  callsPerOrder: number;
  polls: number;
  wasted: number;
  staleness: Summary;
  /**
   * The same without the orders stuck PROCESSING for hours: the goal's own term, the upstream's
   * p99 completion, is the log-normal body's (stuck orders are outside it), so the goal is
   * checked on these. Stuck orders are bounded by the backoff's cap instead (reported apart).
   */
  stalenessNotStuck: Summary;
  stalenessApart: {
    stuck: Summary;
    burst: Summary;
    other: Summary;
  };
  /**
   * Lost-webhook orders (not stuck) by the polls that read them while still open before the one
   * that found them final: 0 = the first poll after completion found it. Tells a late first
   * poll or a budget that held polls back (class 0) from a premature poll and its backoff (1+).
   */
  stalenessByEarlyPolls: Array<{ early: string } & Summary>;
  /** Orders on a stuck timeline (PROCESSING for hours) that were read, and their reads. */
  stuckOrders: number;
  stuckReads: number;
  /** The pace learned by the end of the day, against the profile's true quantile. */
  learned: {
    finalS: number;
    outlierS: number;
    deliveryS: number;
    samples: number;
    trueFinalS: number;
  } | null;
  /** Up to 5 orders whose local state differs from the upstream's at the end. */
  differing: string[];
  burstMaxWaitS: number;
  /** The burst's creates' waits for a slot, p50 and p99 (the max alone is one unlucky racer). */
  burstWaitP50S: number;
  burstWaitP99S: number;
  maxWaitS: number;
  tooMany: number;
  /** When the 429s came, in simulated minutes of the day. */
  tooManyAtMin: number[];
  refundsPlanned: number;
  refundsFound: number;
  refundsFoundInWindow: number;
  coverageEndOfDay: number;
  coverageEnd: number;
  converged: boolean;
  notConverged: number;
  realSeconds: number;
  passes: number;
  passesByBudget: number;
  meanPassGapS: number;
}

interface SimAttempt {
  partner_ref: string;
  final: boolean;
  error: string | null;
  faults: string[];
}

async function runDay(
  p: number,
  quantile: number,
  refunds: number,
  pollFloor = DEFAULT_POLL_FLOOR,
  storeKind: BenchStoreKind = 'sqlite',
): Promise<RunResult> {
  const runStarted = Date.now();
  const dir = mkdtempSync(join(tmpdir(), 'h2h-bench-economics-'));
  const stops: Array<() => unknown> = [() => rmSync(dir, { recursive: true, force: true })];
  try {
    const redisServer = await startRedisServer({ dir: join(dir, 'redis') });
    stops.push(() => redisServer.stop());

    const fixture = JSON.parse(readFileSync('fixtures/demo.json', 'utf8')) as {
      members: Array<{ member_id: string; api_key: string; api_secret: string; webhook_url: string | null }>;
    };
    const member = fixture.members.find((m) => m.member_id === 'M-0001')!;
    // The simulator's answers: member API calls by route and statuses (any 429 fails the run).
    const statuses = new Map<number, number>();
    let memberCalls = 0;
    const tooManyAt: number[] = [];
    /**
     * When each ref was read by GET /orders/:ref (polls and audit reads; real ms): how many reads
     * the stuck orders cost, and premature polls told from late ones.
     */
    const readTimesByRef = new Map<string, number[]>();
    const simLog = pino(
      { level: 'info' },
      new Writable({
        write(chunk, _encoding, done) {
          for (const line of chunk.toString().split('\n')) {
            if (line.includes('incoming request') && line.includes('/v1/member-api')) {
              memberCalls++;
              const read = /"method":"GET","url":"\/v1\/member-api\/orders\/([^"?]+)"/.exec(line)?.[1];
              if (read) {
                const times = readTimesByRef.get(read) ?? [];
                times.push(Date.now());
                readTimesByRef.set(read, times);
              }
            }
            if (!line.includes('request completed')) continue;
            const status = /"statusCode":(\d+)/.exec(line)?.[1];
            if (status) statuses.set(Number(status), (statuses.get(Number(status)) ?? 0) + 1);
            if (status === '429') tooManyAt.push(Date.now());
          }
          done();
        },
      }),
    );
    const sim = await createSimulator({
      fixture: fixture as never,
      profile: 'realistic',
      speed: SPEED,
      scaleRateWindow: true,
      seed: SEED,
      rateLimit: RATE_LIMIT,
      rateWindowMs: RATE_WINDOW_MS,
      logger: simLog,
    });
    stops.push(() => sim.close());
    const control = async (method: 'GET' | 'POST' | 'PATCH', path: string, body?: unknown) => {
      const answer = await request(`${sim.origin}/__sim${path}`, {
        method,
        ...(body === undefined
          ? {}
          : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
      });
      const text = await answer.body.text();
      if (answer.statusCode !== 200)
        throw new Error(`simulator ${method} ${path}: ${answer.statusCode} ${text}`);
      return JSON.parse(text) as unknown;
    };

    const windowMs = RATE_WINDOW_MS * TIME_SCALE;
    const marginMs = Math.max(1000 * TIME_SCALE, MIN_MARGIN_MS);
    const config = loadConfig({
      H2H_BASE_URL: sim.baseUrl,
      H2H_API_KEY: member.api_key,
      H2H_API_SECRET: member.api_secret,
      REDIS_URL: redisServer.url,
      H2H_DB_PATH: join(dir, 'h2h-sync.db'),
      PORT: '0',
      H2H_RECEIVER_METRICS_PORT: '0',
      LOG_LEVEL: 'silent',
    });
    // Every reconciler delay scaled by the one factor, in whole ms, as the store keeps its times
    // (the env settings are whole seconds; PostgreSQL's BIGINT refuses a fraction SQLite kept).
    const scaled = (ms: number) => Math.round(ms * TIME_SCALE);
    const firstPollDelayS =
      ORACLE && quantile > 0
        ? lognormalQuantile(COMPLETION, quantile) + WEBHOOK_DELAY.median_s
        : PRODUCTION.firstPollDelayMs / 1000;
    const settings = {
      ...PRODUCTION,
      everyMs: Math.max(1, Math.round(scaled(PRODUCTION.everyMs))),
      firstPollDelayMs: scaled(firstPollDelayS * 1000),
      // The quantile is the one parameter of the first poll; 0 (and --oracle) turns learning off.
      firstPollQuantile: ORACLE ? 0 : quantile,
      firstPollMinMs: scaled(PRODUCTION.firstPollMinMs),
      firstPollMaxMs: scaled(PRODUCTION.firstPollMaxMs),
      backoffMs: PRODUCTION.backoffMs.map(scaled),
      stuckAfterMs: scaled(PRODUCTION.stuckAfterMs),
      leaseMs: scaled(PRODUCTION.leaseMs),
      auditEveryMs: scaled(AUDIT_DAY_MS * (PRODUCTION.auditEveryMs / 86_400_000)),
      auditWindowMs: scaled(AUDIT_DAY_MS * (PRODUCTION.auditWindowMs / 86_400_000)),
    };
    // One store for the event worker and the reconciler, as in the worker process, opened with
    // the scaled schedule (startWorkerProcess would open it with the whole-second env settings).
    const storeAt = await benchStore(storeKind, dir);
    stops.push(() => storeAt.stop());
    // The default lock wait, as in production (waits are on timers, the event loop runs on).
    const store = withClaims(await openStore(storeAt.url, { role: 'bench' }), settings);
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

    const redis = await connectRedis(redisServer.url, { reconnect: true, connectionName: 'h2h-budget' });
    stops.push(() => redis.disconnect());
    const budget = new TimedRateBudget({
      redis,
      apiKey: member.api_key,
      limit: RATE_LIMIT,
      windowMs,
      marginMs,
      pollFloor,
    });
    const client = new UpstreamClient({
      baseUrl: sim.baseUrl,
      apiKey: member.api_key,
      budget,
      budgetMaxWaitMs: 60 * windowMs,
    });
    stops.push(() => client.close());
    const passes: Array<{ at: number; stoppedBy: string }> = [];
    const reconciler = await startReconciler({
      settings,
      store,
      client,
      budget,
      redisUrl: redisServer.url,
      logger: pino({ level: 'warn' }, process.stderr),
      onPass: (summary) => {
        passes.push({ at: Date.now(), stoppedBy: summary.stoppedBy });
      },
    });
    stops.push(() => reconciler.close());

    await control('POST', '/faults', { webhook_drop_final: p });
    await control('PATCH', '/members/M-0001', { webhook_url: receiver.webhookUrl, balance: 1e12 });

    // Arrivals: a Poisson process at the rate, BURST_X times it during the burst (from a quarter
    // of the day); the receiver is unreachable for the outage (from 60 % of the day).
    const dayMs = HOURS * 3_600_000;
    const burstFrom = dayMs / 4;
    const burstTo = burstFrom + BURST_MIN * 60_000;
    const outageFrom = dayMs * 0.6;
    const outageTo = outageFrom + OUTAGE_MIN * 60_000;
    const draw = random(SEED * 7919 + 1);
    const arrivals: number[] = [];
    for (let t = 0; ; ) {
      const rate = (RATE_PER_MIN / 60_000) * (t >= burstFrom && t < burstTo ? BURST_X : 1);
      t += -Math.log(1 - draw()) / rate;
      if (t >= dayMs) break;
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
    const placements: Array<Promise<void>> = [];
    const refundRefs: string[] = [];
    let placeErrors = 0;
    const sleepUntil = (at: number) =>
      new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())));
    let outage: 'before' | 'on' | 'after' = 'before';
    for (const [i, at] of arrivals.entries()) {
      await sleepUntil(realAt(at));
      if (outage === 'before' && at >= outageFrom) {
        outage = 'on';
        await control('PATCH', '/members/M-0001', { webhook_url: 'http://127.0.0.1:1/webhooks/h2h' });
      }
      if (outage === 'on' && at >= outageTo) {
        outage = 'after';
        await control('PATCH', '/members/M-0001', { webhook_url: receiver.webhookUrl });
      }
      const suffix = suffixOf();
      const partnerRef = `eco-${String(i).padStart(6, '0')}`;
      placements.push(
        placeOrder(
          { client, store },
          {
            productCode: PRODUCT,
            data: { user_id: `${1_000_000 + i}${suffix}`, server_id: '2001' },
            partnerRef,
          },
        ).then(
          async (result) => {
            if (result.outcome !== 'accepted') {
              placeErrors++;
              return;
            }
            if (suffix === '0001' && refundRefs.length < refunds) {
              refundRefs.push(partnerRef);
              await control('POST', `/orders/${partnerRef}/refund`, {
                after_days: (REFUND_AFTER_DAYS * AUDIT_DAY_MS) / 86_400_000,
                lose_webhooks: true,
              });
            }
          },
          () => {
            placeErrors++;
          },
        ),
      );
    }
    if (outage === 'on') await control('PATCH', '/members/M-0001', { webhook_url: receiver.webhookUrl });
    await sleepUntil(realAt(dayMs));
    await Promise.all(placements);

    const coverage = async () => {
      const now = Date.now();
      const row = (await store.db.get<{ total: number; checked: number }>(
        `SELECT COUNT(*) AS total,
                COALESCE(SUM(CASE WHEN ${checkedAtSql(store.db)} > @checkedSince THEN 1 ELSE 0 END), 0) AS checked
         FROM orders WHERE status = 'SUCCESS' AND final_at >= @finalSince`,
        { checkedSince: now - settings.auditEveryMs, finalSince: now - settings.auditWindowMs },
      ))!;
      return row.total === 0 ? 1 : row.checked / row.total;
    };
    const coverageEndOfDay = await coverage();
    const pace = (await store.pollPlans.ofUpstream(DEFAULT_UPSTREAM)).get(PRODUCT) ?? null;

    // The tail: until every order matches the simulator's truth and every refund is found, or
    // the last refund has left the audit window.
    const refundFoundAt = new Map<string, number>();
    const truth = async () =>
      new Map(((await control('GET', '/orders')) as Order[]).map((o) => [o.partner_ref, o]));
    // Two simulated hours for the last orders (a stuck one's final poll may come an hour after it
    // completes), and for refunds until they leave the audit window: not found by then is a miss.
    const refundWindowEnd = realAt(REFUND_AFTER_DAYS * AUDIT_DAY_MS + 3_600_000) + settings.auditWindowMs;
    // A stuck order completes up to hours after the day (the profile's p99 stuck duration) and,
    // with its final webhook lost, is polled on the backoff's cap: wait that long, but no more.
    const convergeBy = realAt(
      dayMs + REALISTIC_DEFAULTS.stuck_duration.p99_s * 1000 + 2 * PRODUCTION.backoffMs.at(-1)!,
    );
    const tailEnd = Math.max(convergeBy, refunds > 0 ? refundWindowEnd : 0);
    let differing: string[] = [];
    let upstream = await truth();
    let open = Number.POSITIVE_INFINITY;
    // The refunds are looked for every 100 ms; the whole comparison (every order, a large JSON
    // from the simulator) once a second, since it holds this process's event loop, which the
    // simulator and the client share, and a stall between a grant and its request is a 429.
    for (let tick = 0; ; tick++) {
      for (const ref of refundRefs) {
        if (!refundFoundAt.has(ref) && (await store.queries.getOrder(ref))?.status === 'REFUNDED')
          refundFoundAt.set(ref, Date.now());
      }
      if (tick % 10 === 0) {
        upstream = await truth();
        open = 0;
        differing = [];
        for (const o of upstream.values()) {
          const local = await store.queries.getOrder(o.partner_ref);
          if (!local || local.status !== o.status || local.serialNumber !== o.serial_number) {
            open++;
            if (differing.length < 5)
              differing.push(`${o.partner_ref}: upstream ${o.status}, local ${local?.status ?? 'missing'}`);
          }
        }
        if (open === 0 && refundFoundAt.size === refundRefs.length) break;
      }
      if (Date.now() > tailEnd) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    // What the calls bought.
    const counter = async (name: string, outcome?: string) => {
      const metric = reconciler.metrics.registry.getSingleMetric(name);
      if (!metric) return 0;
      return (await metric.get()).values
        .filter((v) => outcome === undefined || v.labels.outcome === outcome)
        .reduce((sum, v) => sum + v.value, 0);
    };
    const polls = await counter('h2h_reconcile_polls_total');
    const wasted = await counter('h2h_reconcile_polls_total', 'unchanged');
    const auditReads = await counter('h2h_reconcile_audit_reads_total');
    const refundsFound = await counter('h2h_reconcile_audit_refunds_found_total');
    const calls = memberCalls;

    const attempts = (await control('GET', '/webhooks')) as SimAttempt[];
    const lostRefs = new Set(
      attempts
        .filter((a) => a.final && a.error === 'dropped' && !a.faults.includes('planned_loss'))
        .map((a) => a.partner_ref),
    );
    const stale: number[] = [];
    const staleStuck: number[] = [];
    const staleBurst: number[] = [];
    const staleOther: number[] = [];
    const staleByEarly = new Map<number, number[]>();
    const staleNotStuck: number[] = [];
    for (const ref of lostRefs) {
      const order = upstream.get(ref);
      const local = await store.queries.getOrder(ref);
      if (!order || !local?.finalAt) continue;
      const timeline = (await control('GET', `/orders/${ref}/timeline`)) as {
        stuck: boolean;
        steps: Array<{ status: string; with_serial: boolean; at_ms: number }>;
      };
      const finalStep = timeline.steps.find(
        (s) => s.status === 'FAILED' || (s.status === 'SUCCESS' && s.with_serial),
      );
      if (!finalStep) continue;
      const upstreamFinal = Date.parse(order.created_at) + finalStep.at_ms * TIME_SCALE;
      const staleS = simS(local.finalAt - upstreamFinal);
      stale.push(staleS);
      // Apart, to show where the tail comes from: orders that completed while the burst kept
      // every slot for creation or in the half hour after it (the creates' backlog, then the
      // polls' backlog drain), and stuck orders.
      if (timeline.stuck) staleStuck.push(staleS);
      else if (upstreamFinal >= realAt(burstFrom) && upstreamFinal < realAt(burstTo + 30 * 60_000))
        staleBurst.push(staleS);
      else staleOther.push(staleS);
      if (!timeline.stuck) {
        staleNotStuck.push(staleS);
        const early = (readTimesByRef.get(ref) ?? []).filter((at) => at < upstreamFinal).length;
        const key = Math.min(early, 2);
        const list = staleByEarly.get(key) ?? [];
        list.push(staleS);
        staleByEarly.set(key, list);
      }
    }
    for (const list of [staleNotStuck, ...staleByEarly.values()]) list.sort((a, b) => a - b);
    for (const list of [stale, staleStuck, staleBurst, staleOther]) list.sort((a, b) => a - b);
    let stuckOrders = 0;
    let stuckReads = 0;
    for (const [ref, { length: reads }] of readTimesByRef) {
      const timeline = (await control('GET', `/orders/${encodeURIComponent(ref)}/timeline`)) as {
        stuck: boolean;
      };
      if (timeline.stuck) {
        stuckOrders++;
        stuckReads += reads;
      }
    }

    const waits = budget.createWaits;
    const burstWaits = waits.filter((w) => w.at >= realAt(burstFrom) && w.at < realAt(burstTo + 60_000));
    const maxOf = (ws: typeof waits) => ws.reduce((m, w) => Math.max(m, w.waitedMs), 0);
    const orders = arrivals.length;
    // Found within the audit window: before the order's SUCCESS leaves it.
    let refundsFoundInWindow = 0;
    for (const [ref, at] of refundFoundAt) {
      const successAt = Date.parse(upstream.get(ref)?.success_at ?? '');
      if (at - successAt <= settings.auditWindowMs) refundsFoundInWindow++;
    }
    const result: RunResult = {
      p,
      quantile,
      pollFloor,
      store: storeKind,
      firstPollDelayS,
      orders,
      calls: calls - auditReads,
      auditReads,
      lostFinals: lostRefs.size,
      floor: 1 + lostRefs.size / orders,
      callsPerOrder: (calls - auditReads) / orders,
      polls,
      wasted,
      staleness: summaryOf(stale),
      stalenessNotStuck: summaryOf(staleNotStuck),
      stalenessApart: {
        stuck: summaryOf(staleStuck),
        burst: summaryOf(staleBurst),
        other: summaryOf(staleOther),
      },
      stalenessByEarlyPolls: [...staleByEarly.entries()]
        .sort(([a], [b]) => a - b)
        .map(([early, list]) => ({ early: early >= 2 ? '2+' : String(early), ...summaryOf(list) })),
      differing,
      stuckOrders,
      stuckReads,
      learned: pace && {
        finalS: simS(pace.finalMs),
        outlierS: pace.outlierMs === null ? Number.POSITIVE_INFINITY : simS(pace.outlierMs),
        deliveryS: simS(pace.deliveryMs),
        samples: pace.samples,
        trueFinalS: quantile > 0 ? lognormalQuantile(COMPLETION, quantile) : Number.NaN,
      },
      burstMaxWaitS: simS(maxOf(burstWaits)),
      ...(() => {
        const sorted = burstWaits.map((w) => simS(w.waitedMs)).sort((a, b) => a - b);
        return { burstWaitP50S: percentile(sorted, 0.5), burstWaitP99S: percentile(sorted, 0.99) };
      })(),
      maxWaitS: simS(maxOf(waits)),
      tooMany: statuses.get(429) ?? 0,
      tooManyAtMin: tooManyAt.map((at) => Math.round(simS(at - started) / 60)),
      refundsPlanned: refundRefs.length,
      refundsFound,
      refundsFoundInWindow,
      coverageEndOfDay,
      coverageEnd: await coverage(),
      converged: open === 0 && placeErrors === 0,
      notConverged: open + placeErrors,
      realSeconds: (Date.now() - runStarted) / 1000,
      passes: passes.length,
      passesByBudget: passes.filter((x) => x.stoppedBy === 'budget').length,
      meanPassGapS:
        passes.length < 2 ? Number.NaN : simS((passes.at(-1)!.at - passes[0]!.at) / (passes.length - 1)),
    };
    return result;
  } finally {
    for (const stop of stops.reverse()) await Promise.resolve(stop()).catch(() => {});
  }
}

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;

function describeFirstPoll(r: RunResult): string {
  if (r.quantile === 0) return `fixed ${fmtS(r.firstPollDelayS)} (quantile 0: learning off)`;
  if (ORACLE) return `fixed ${fmtS(r.firstPollDelayS)} (q ${r.quantile} of the profile)`;
  return `learned, quantile ${r.quantile}`;
}

function printRun(r: RunResult): void {
  const stuckNote = r.converged ? '' : ` (NOT converged: ${r.notConverged} orders differ from the upstream)`;
  console.log(
    `\n== p = ${r.p}: ${r.orders} orders, first poll ${describeFirstPoll(r)}, poll floor ${r.pollFloor}, store ${r.store}; ${r.realSeconds.toFixed(0)} s real${stuckNote}`,
  );
  console.log(
    `  upstream calls per order   ${r.callsPerOrder.toFixed(3)} (${r.calls} calls: creates, polls, probes); floor ${r.floor.toFixed(3)} ` +
      `(1 + ${r.lostFinals} final webhooks lost / ${r.orders}); ${(r.callsPerOrder / r.floor).toFixed(3)} × floor`,
  );
  console.log(
    `    of which                 ${r.stuckReads} reads of ${r.stuckOrders} orders stuck PROCESSING for hours (${(r.stuckReads / r.orders).toFixed(3)} per order of the day), which the floor does not count`,
  );
  console.log(
    `  passes                     ${r.passes} (mean gap ${fmtS(r.meanPassGapS)}; ${r.passesByBudget} ended because the poll share was spent)`,
  );
  if (r.learned && r.quantile > 0 && !ORACLE)
    console.log(
      `  learned pace               q ${r.quantile} of time to final ${fmtS(r.learned.finalS)} (profile's true ${fmtS(r.learned.trueFinalS)}), ` +
        `outlier time ${fmtS(r.learned.outlierS)} (profile's true 99.9th percentile ${fmtS(lognormalQuantile(COMPLETION, 0.999))}), ` +
        `delivery median ${fmtS(r.learned.deliveryS)}, ${r.learned.samples.toFixed(0)} samples (by weight) at the end of the day`,
    );
  console.log(
    `  wasted polls               ${r.wasted} of ${r.polls} polls (${pct(r.polls === 0 ? 0 : r.wasted / r.polls)}) found no change`,
  );
  console.log(
    `  staleness, lost webhooks   p50 ${fmtS(r.staleness.p50)}, p99 ${fmtS(r.staleness.p99)}, max ${fmtS(r.staleness.max)} ` +
      `(${r.staleness.n} orders, upstream final → local final, simulated time)`,
  );
  const a = r.stalenessApart;
  const ns = r.stalenessNotStuck;
  console.log(
    `    not stuck for hours      p50 ${fmtS(ns.p50)}, p99 ${fmtS(ns.p99)}, max ${fmtS(ns.max)} (${ns.n} orders; the goal is checked on these)`,
  );
  console.log(
    `    of which                 ${a.other.n} outside the burst: p99 ${fmtS(a.other.p99)}, max ${fmtS(a.other.max)}; ` +
      `${a.burst.n} completed in the burst or the 30 min after it: p99 ${fmtS(a.burst.p99)}, max ${fmtS(a.burst.max)}; ` +
      `${a.stuck.n} stuck for hours: max ${fmtS(a.stuck.max)}`,
  );
  console.log(
    `    by premature polls       ${r.stalenessByEarlyPolls
      .map(
        (c) =>
          `${c.early} before completion: ${c.n} orders, p50 ${fmtS(c.p50)}, p99 ${fmtS(c.p99)}, max ${fmtS(c.max)}`,
      )
      .join('; ')}`,
  );
  for (const d of r.differing) console.log(`  not converged: ${d}`);
  console.log(
    `  budget slot wait (create)  in the burst p50 ${fmtS(r.burstWaitP50S)}, p99 ${fmtS(r.burstWaitP99S)}, longest ${fmtS(r.burstMaxWaitS)}; ${fmtS(r.maxWaitS)} all day; 429 answers: ${r.tooMany}${r.tooMany ? ` (at minute ${r.tooManyAtMin.join(', ')} of the day)` : ''}`,
  );
  console.log(
    `  late refunds               ${r.refundsFound} found by the audit of ${r.refundsPlanned} planned (${r.refundsFoundInWindow} within the audit window); ` +
      `${r.auditReads} audit reads; coverage ${pct(r.coverageEndOfDay)} at the end of the day, ${pct(r.coverageEnd)} at the end`,
  );
}

async function main(): Promise<number> {
  const [load1] = loadavg();
  const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'}, Node ${process.version}`;
  const passS = PRODUCTION.everyMs / 1000;
  const stalenessGoalS = COMPLETION.p99_s + 2 * passS;
  console.log(
    `A day in production, time-scaled ${SPEED}× (1 real s = ${SPEED} simulated s): ${HOURS} h of orders at ${RATE_PER_MIN}/min, ` +
      `a ${BURST_MIN}-min burst at ${BURST_X}× from a quarter of the day, a receiver outage of ${OUTAGE_MIN.toFixed(1)} min ` +
      `(20 min per 24 h) from 60 % of the day; realistic profile (completion median ${COMPLETION.median_s} s, p99 ${COMPLETION.p99_s} s), ` +
      `${REFUNDS} refunds ${REFUND_AFTER_DAYS} audit days after success with every webhook lost.`,
  );
  console.log(
    `Scaled by the one factor: the simulator's time, the rate window (${RATE_LIMIT} per ${(RATE_WINDOW_MS * TIME_SCALE).toFixed(0)} ms real, ` +
      `margin ${Math.max(1000 * TIME_SCALE, MIN_MARGIN_MS).toFixed(1)} ms = max(1 s scaled, --margin-ms)), the pass interval and every reconciler delay. ` +
      `Audit time compressed further: 1 audit day = ${AUDIT_DAY_MS / 3_600_000} simulated h. Figures below are simulated time.`,
  );
  console.log(
    ORACLE
      ? "First poll (--oracle): no learning; a quantile q stands for a fixed delay at the q-quantile of the profile's completion + its median webhook delay, what learning should converge to."
      : `First poll: learned pace (firstPollQuantile; at least ${PRODUCTION.paceMinSamples} final webhooks first, ${fmtS(PRODUCTION.firstPollDelayMs / 1000)} until then; bounds ${fmtS(PRODUCTION.firstPollMinMs / 1000)} … ${fmtS(PRODUCTION.firstPollMaxMs / 1000)}).`,
  );
  console.log(`machine: ${machine}; load average at start ${load1?.toFixed(2)}`);

  const results: RunResult[] = [];
  for (const p of P_VALUES) {
    for (const pollFloor of POLL_FLOORS) {
      for (const storeKind of STORES) {
        const r = await runDay(p, DEFAULT_QUANTILE, REFUNDS, pollFloor, storeKind);
        printRun(r);
        results.push(r);
      }
    }
  }
  const curve: RunResult[] = [];
  for (const q of QUANTILES) {
    const same = results.find(
      (r) =>
        r.p === CURVE_P && r.quantile === q && r.pollFloor === DEFAULT_POLL_FLOOR && r.store === 'sqlite',
    );
    // The curve's runs plan no refunds (the audit's figures come from the runs above), so that
    // they end with the day.
    const r = same ?? (await runDay(CURVE_P, q, 0));
    if (!same) printRun(r);
    curve.push(r);
  }
  const defaultAtCurveP = results.find((r) => r.p === CURVE_P && r.pollFloor === DEFAULT_POLL_FLOOR);
  if (defaultAtCurveP && !curve.includes(defaultAtCurveP)) curve.push(defaultAtCurveP);

  if (curve.length > 0) {
    console.log(`\nFirst-poll quantile curve at p = ${CURVE_P}:`);
    console.log('| first poll | calls/order | × floor | wasted polls | staleness p50 | p99 | max |');
    console.log('|---|---|---|---|---|---|---|');
    for (const r of curve) {
      console.log(
        `| ${describeFirstPoll(r)} | ${r.callsPerOrder.toFixed(3)} | ${(r.callsPerOrder / r.floor).toFixed(3)} | ${pct(r.polls === 0 ? 0 : r.wasted / r.polls)} | ` +
          `${fmtS(r.staleness.p50)} | ${fmtS(r.staleness.p99)} | ${fmtS(r.staleness.max)} |`,
      );
    }
  }

  const [endLoad1, endLoad5] = loadavg();
  console.log(
    `\nmachine: ${machine}; load average at the end ${endLoad1?.toFixed(2)} / ${endLoad5?.toFixed(2)}`,
  );
  console.log(
    '\n| date | p | first poll | poll floor | orders | calls/order | floor | × floor | wasted | stale p50 / p99 / max | p99 not stuck | burst wait p99 / max | 429 | refunds found | coverage |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    console.log(
      `| ${new Date().toISOString().slice(0, 10)} | ${r.p} | ${describeFirstPoll(r)} | ${r.pollFloor} | ${r.orders} | ${r.callsPerOrder.toFixed(3)} | ${r.floor.toFixed(3)} | ` +
        `**${(r.callsPerOrder / r.floor).toFixed(3)}** | ${pct(r.polls === 0 ? 0 : r.wasted / r.polls)} | ` +
        `${fmtS(r.staleness.p50)} / ${fmtS(r.staleness.p99)} / ${fmtS(r.staleness.max)} | **${fmtS(r.stalenessNotStuck.p99)}** | ${fmtS(r.burstWaitP99S)} / ${fmtS(r.burstMaxWaitS)} | ${r.tooMany} | ` +
        `${r.refundsFoundInWindow}/${r.refundsPlanned} | ${pct(r.coverageEndOfDay)} → ${pct(r.coverageEnd)} |`,
    );
  }

  const failures: string[] = [];
  for (const r of [...results, ...curve.filter((c) => !results.includes(c))]) {
    const at = `p = ${r.p}, first poll ${describeFirstPoll(r)}`;
    if (r.tooMany > 0) failures.push(`${at}: ${r.tooMany} answers 429`);
    if (!r.converged) failures.push(`${at}: ${r.notConverged} orders did not converge`);
    if (r.refundsFoundInWindow < r.refundsPlanned)
      failures.push(
        `${at}: ${r.refundsPlanned - r.refundsFoundInWindow} of ${r.refundsPlanned} late refunds not found within the audit window`,
      );
  }
  for (const r of results) {
    const at = `p = ${r.p}, poll floor ${r.pollFloor}, ${r.store}`;
    const ratio = r.callsPerOrder / r.floor;
    const limit = r.p === 0.02 ? 1.15 : r.p === 0.25 ? 1.1 : undefined;
    if (limit !== undefined && ratio > limit)
      failures.push(
        `${at}: ${r.callsPerOrder.toFixed(3)} calls per order = ${ratio.toFixed(3)} × the floor ${r.floor.toFixed(3)} > ${limit}`,
      );
    const stale = r.stalenessNotStuck;
    if (stale.n > 0 && stale.p99 > stalenessGoalS)
      failures.push(
        `${at}: p99 staleness of lost-webhook orders not stuck for hours ${fmtS(stale.p99)} > ${fmtS(stalenessGoalS)} (upstream p99 completion ${COMPLETION.p99_s} s + 2 passes of ${passS} s)`,
      );
  }
  for (const failure of failures) console.error(`FAILED: ${failure}`);
  return failures.length === 0 ? 0 : 1;
}

process.exitCode = await main();
