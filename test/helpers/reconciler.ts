import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type { Database } from 'better-sqlite3';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { loadConfig, type ReconcilerSettings, reconcilerSettings } from '../../src/config/config.js';
import { type RedisServer, startRedisServer } from '../../src/dev/redis-server.js';
import { RateBudget, type RateBudgetOptions } from '../../src/rate-budget/rate-budget.js';
import { createReconcilerMetrics, type ReconcilerMetrics } from '../../src/reconciler/metrics.js';
import type { ReconcilerDeps } from '../../src/reconciler/poll-order.js';
import { type RunningReconciler, startReconciler } from '../../src/reconciler/reconciler.js';
import type { ClaimingStore } from '../../src/store/order-store.js';
import { UpstreamClient, type UpstreamClientOptions } from '../../src/upstream/client.js';
import type { Order } from '../../src/upstream/model.js';
import { type CapturedLogger, capturedLogger } from './logs.js';
import {
  startSimulator,
  type TestSimulator,
  type TestSimulatorOptions,
  userIdEndingIn,
} from './simulator.js';
import { type ManualClock, tempStore } from './store.js';

/** Reconciler settings scaled for tests: a pass every 200 ms, first poll after 100 ms, backoff 100/200/400 ms. */
export function testSettings(overrides: Partial<ReconcilerSettings> = {}): ReconcilerSettings {
  return {
    ...reconcilerSettings(loadConfig({})),
    everyMs: 200,
    firstPollDelayMs: 100,
    backoffMs: [100, 200, 400],
    leaseMs: 10_000,
    ...overrides,
  };
}

/** Counts the simulator's member API requests from its Fastify request log. */
export interface RequestLog {
  logger: Logger;
  /** GET /orders/:ref requests per ref (decoded). */
  getsByRef(): Map<string, number>;
  /** The refs of GET /orders/:ref requests (decoded), in the order they arrived. */
  gets(): string[];
  /** Answers by HTTP status. */
  statuses(): Map<number, number>;
}

export function simulatorRequestLog(): RequestLog {
  const { logger, records } = capturedLogger({ name: 'sim', level: 'debug' });
  const prefix = '/v1/member-api/orders/';
  const gets = () =>
    records().flatMap((line) => {
      const req = line.req as { method?: string; url?: string } | undefined;
      if (line.msg !== 'incoming request' || req?.method !== 'GET' || !req.url?.startsWith(prefix)) return [];
      return [decodeURIComponent(req.url.slice(prefix.length))];
    });
  return {
    logger,
    gets,
    getsByRef() {
      const counts = new Map<string, number>();
      for (const ref of gets()) counts.set(ref, (counts.get(ref) ?? 0) + 1);
      return counts;
    },
    statuses() {
      const counts = new Map<number, number>();
      for (const line of records()) {
        const status = (line.res as { statusCode?: number } | undefined)?.statusCode;
        if (line.msg === 'request completed' && typeof status === 'number') {
          counts.set(status, (counts.get(status) ?? 0) + 1);
        }
      }
      return counts;
    },
  };
}

export interface ReconcilerEnvOptions {
  sim?: TestSimulatorOptions;
  settings?: Partial<ReconcilerSettings>;
  /** Budget options besides redis and key. Default: 100 calls per 1 s window, no margin. */
  budget?: Partial<Omit<RateBudgetOptions, 'redis' | 'apiKey'>>;
  client?: Partial<UpstreamClientOptions>;
  /** A manual clock for the store and the reconciler; default the real one. */
  manualClock?: boolean;
  redis?: RedisServer;
  /** The store's BALANCE_DRIFT_THRESHOLD. Default: 0 (off). */
  balanceDriftThreshold?: number;
}

export interface ReconcilerEnv {
  sim: TestSimulator;
  redis: RedisServer;
  redisClient: Redis;
  store: ClaimingStore;
  /** The store's connection (the event worker's group commit needs it). */
  db: Database;
  dbPath: string;
  clock: ManualClock;
  now: () => number;
  budget: RateBudget;
  client: UpstreamClient;
  settings: ReconcilerSettings;
  metrics: ReconcilerMetrics;
  log: CapturedLogger;
  deps: ReconcilerDeps;
  /**
   * Runs `close` when the test ends, before the Redis server and the client stop (last deferred,
   * first run): reconcilers and workers must close while Redis is still there.
   */
  defer(close: () => unknown): void;
}

/** A simulator, a private Redis, a store on a temp SQLite file and a client with the shared budget. */
export async function reconcilerEnv(
  t: TestContext,
  options: ReconcilerEnvOptions = {},
): Promise<ReconcilerEnv> {
  const cleanups: Array<() => unknown> = [];
  t.after(async () => {
    for (const close of cleanups.reverse()) await close();
  });
  const defer = (close: () => unknown) => {
    cleanups.push(close);
  };
  const sim = await startSimulator(t, options.sim);
  let redis = options.redis;
  if (!redis) {
    const started = await startRedisServer();
    defer(() => started.stop());
    redis = started;
  }
  const settings = testSettings(options.settings);
  const redisClient = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  defer(() => redisClient.disconnect());
  const { store, db, path, clock } = await tempStore(t, {
    ...settings,
    ...(options.manualClock ? {} : { now: Date.now }),
    ...(options.balanceDriftThreshold === undefined
      ? {}
      : { balanceDriftThreshold: options.balanceDriftThreshold }),
  });
  const now = options.manualClock ? clock.now : Date.now;
  const budget = new RateBudget({
    redis: redisClient,
    apiKey: sim.member.api_key,
    limit: 100,
    windowMs: 1000,
    marginMs: 0,
    ...options.budget,
  });
  const log = capturedLogger({ name: 'reconciler', level: 'debug' });
  const client = new UpstreamClient({
    baseUrl: sim.sim.baseUrl,
    apiKey: sim.member.api_key,
    headersTimeoutMs: 2000,
    retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 20 },
    budget,
    budgetMaxWaitMs: 5000,
    ...options.client,
  });
  defer(() => client.close());
  const metrics = createReconcilerMetrics({
    queries: store.queries,
    circuit: store.circuit,
    auditWindowMs: settings.auditWindowMs,
  });
  const deps: ReconcilerDeps = { store, client, settings, metrics, logger: log.logger, now };
  return {
    sim,
    redis,
    redisClient,
    store,
    db,
    dbPath: path,
    clock,
    now,
    budget,
    client,
    settings,
    metrics,
    log,
    deps,
    defer,
  };
}

/**
 * Starts a reconciler on the env's settings, store, client, budget, Redis, logger and metrics;
 * it closes when the test ends.
 */
export async function startTestReconciler(env: ReconcilerEnv): Promise<RunningReconciler> {
  const reconciler = await startReconciler({
    settings: env.settings,
    store: env.store,
    client: env.client,
    budget: env.budget,
    redisUrl: env.redis.url,
    logger: env.log.logger,
    metrics: env.metrics,
  });
  env.defer(() => reconciler.close());
  return reconciler;
}

/** The order's target data for a timeline suffix (docs/simulator.md, "Magic suffixes"). */
export function targetFor(suffix: string): { user_id: string; server_id: string } {
  return { user_id: userIdEndingIn(suffix), server_id: '2001' };
}

/**
 * Creates an order upstream through the simulator's HTTP API directly (no budget slot) and
 * stores the answer as a create would: for tests that must not spend the budget on placement.
 */
export async function createUpstreamOrder(
  env: ReconcilerEnv,
  partnerRef: string,
  suffix = '0007',
): Promise<Order> {
  const answer = await env.sim.createOrder({ partner_ref: partnerRef, data: targetFor(suffix) });
  assert.equal(answer.status, 201, answer.text);
  await env.store.writer.applyOrderSnapshot(answer.body, { source: 'create' });
  return answer.body;
}

/** Local orders that differ from the simulator's truth (status, serial, success_at), or are still open though final upstream. */
export async function differencesFromSimulator(
  store: ClaimingStore,
  sim: TestSimulator,
  refs?: readonly string[],
): Promise<string[]> {
  const truth = (await sim.allOrders()).filter((o) => !refs || refs.includes(o.partner_ref));
  const problems: string[] = [];
  for (const upstream of truth) {
    const local = await store.queries.getOrder(upstream.partner_ref);
    const want = [upstream.status, upstream.serial_number, upstream.success_at, upstream.invoice_number];
    const got = [local?.upstreamStatus, local?.serialNumber, local?.successAt, local?.invoiceNumber];
    if (JSON.stringify(want) !== JSON.stringify(got)) {
      problems.push(
        `${upstream.partner_ref}: upstream ${JSON.stringify(want)}, local ${JSON.stringify(got)}`,
      );
    }
  }
  return problems;
}

/** A metric's value from a registry (sum over the given labels' matches). */
export async function metricValue(
  metrics: ReconcilerMetrics,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const metric = metrics.registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  return values
    .filter((v) =>
      Object.entries(labels).every(([k, want]) => String((v.labels as Record<string, unknown>)[k]) === want),
    )
    .filter((v) => !('metricName' in v) || v.metricName === name || v.metricName === undefined)
    .reduce((sum, v) => sum + v.value, 0);
}
