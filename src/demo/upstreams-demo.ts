import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { request } from 'undici';
import { startApi } from '../api/server.js';
import { loadConfig, receiverSettings } from '../config/config.js';
import { startRedisServer } from '../dev/redis-server.js';
import type { PublicOrder } from '../domain/public-order.js';
import { addEndpoint } from '../notify/operations.js';
import { newPartnerRef } from '../orders/partner-ref.js';
import { startReceiver } from '../receiver/server.js';
import { startSimulatedUpstreams } from '../simulator/simulated-upstreams.js';
import type { Order } from '../upstream/model.js';
import { startWorkerProcess } from '../worker/server.js';
import { DEMO_TIME_SCALE } from './defaults.js';
import {
  BETA_FIXTURE,
  BETA_KEY,
  BETA_SECRET,
  DEMO_FAULTS,
  DEMO_FIXTURE,
  DEMO_KEY,
  DEMO_REALISTIC,
  DEMO_SECRET,
  DEMO_SIM_RATE,
  demoServiceEnvironment,
} from './demo-settings.js';
import { type ShopNotificationCounts, startDemoShop } from './demo-shop.js';
import {
  compareOrderViews,
  totalsOf,
  type UpstreamsDemoRow,
  type UpstreamsDemoTotals,
} from './upstreams-agreement.js';

/** The demo's two upstreams: `default` (the demo fixture) and the cheaper `beta`. */
export const DEMO_UPSTREAMS = ['default', 'beta'] as const;
/** The product every order of the two-upstream demo buys: 19,500 on default, 18,500 on beta. */
export const UPSTREAMS_DEMO_PRODUCT = 'MLBB-86';

export interface UpstreamsDemoOptions {
  /** Orders the shop places at once at the start, all routed to beta. Default: 16. */
  rush?: number;
  /** Orders placed once the rush has ended, when beta's balance is below the price. Default: 4. */
  later?: number;
  /** Longest wait for every order to end and agree. Default: 180000 ms. */
  timeoutMs?: number;
  /** The simulators' seed (faults, timings and which of beta's orders fail). Default: 1. */
  seed?: number;
  /** The simulators' timing profile. Default: `realistic`. */
  profile?: 'fast' | 'realistic';
  /** The simulators' timeScale. Default: {@link DEMO_TIME_SCALE}. */
  timeScale?: number;
  /** Called about twice a second with the count of orders on which every side agrees. */
  onProgress?: (agreeing: number, total: number, elapsedMs: number) => void;
}

/** An upstream's balance at the end: its simulator's member, and what h2h-sync accounts. */
export interface UpstreamBalanceAtEnd {
  upstream: string;
  simulator: number;
  accounted: number | null;
}

export interface UpstreamsDemoReport {
  rows: UpstreamsDemoRow[];
  totals: UpstreamsDemoTotals;
  /** Every order: final, store and upstreams agree, at most one SUCCESS, the shop agrees. */
  allAgree: boolean;
  elapsedMs: number;
  balances: UpstreamBalanceAtEnd[];
  /** The shop's side: what it did with the notifications, and each order as it holds it. */
  shop: { notifications: ShopNotificationCounts; orders: PublicOrder[] };
  policy: 'cheapest';
  faults: typeof DEMO_FAULTS;
  profile: 'fast' | 'realistic';
  timeScale: number;
  seed: number;
}

/**
 * The demo with two upstreams (docs/demo.md): a private Redis, two simulators (`default`, the demo
 * fixture, and `beta`, cheaper, failing a quarter of its orders, with 150,000 of balance), both
 * under {@link DEMO_FAULTS}; the receiver, the worker (a pump, reconciler and catalog refresh per
 * upstream), the shop API routing by `cheapest`, and the small shop. The shop places a rush of
 * orders at once (all routed to beta, the cheaper: its balance covers eight), waits until every one
 * has ended, then places a few more (beta's balance below the price: routed to default). Beta's
 * FAILED orders and its INSUFFICIENT_BALANCE refusals go on to default. Each order is followed
 * until the store has it final, every attempt is on its upstream as the store says, no upstream
 * holds a second SUCCESS, and the shop holds the store's latest version. Everything it started is
 * stopped and its files removed before it resolves.
 */
export async function runUpstreamsDemo(options: UpstreamsDemoOptions = {}): Promise<UpstreamsDemoReport> {
  const timeoutMs = options.timeoutMs ?? 180_000;
  const profile = options.profile ?? 'realistic';
  const timeScale = options.timeScale ?? DEMO_TIME_SCALE;
  const seed = options.seed ?? 1;
  const dir = mkdtempSync(join(tmpdir(), 'h2h-demo-'));
  const stops: Array<() => Promise<unknown> | unknown> = [
    () => rmSync(dir, { recursive: true, force: true }),
  ];
  try {
    const redis = await startRedisServer({ dir: join(dir, 'redis') });
    stops.push(() => redis.stop());
    const simOptions = {
      profile,
      realistic: DEMO_REALISTIC,
      timeScale,
      seed,
      ...DEMO_SIM_RATE,
      faults: DEMO_FAULTS,
    };
    const sims = await startSimulatedUpstreams([
      { name: 'default', fixture: DEMO_FIXTURE, ...simOptions },
      { name: 'beta', fixture: BETA_FIXTURE, ...simOptions },
    ]);
    stops.push(() => sims.close());
    const control = async (upstream: string, method: 'GET' | 'PATCH', path: string, body?: unknown) => {
      const answer = await request(`${sims.get(upstream).origin}/__sim${path}`, {
        method,
        ...(body === undefined
          ? {}
          : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      });
      const text = await answer.body.text();
      if (answer.statusCode !== 200)
        throw new Error(`simulator ${upstream} ${method} ${path}: ${answer.statusCode} ${text}`);
      return JSON.parse(text) as unknown;
    };

    // h2h-sync's upstreams file (docs/upstreams.md): default is H2H_BASE_URL's, beta has its own.
    const upstreamsFile = join(dir, 'upstreams.json');
    writeFileSync(
      upstreamsFile,
      JSON.stringify({
        upstreams: [{ name: 'default' }, { name: 'beta', base_url: sims.get('beta').baseUrl }],
      }),
    );
    const config = loadConfig({
      ...demoServiceEnvironment(redis.url, join(dir, 'h2h-sync.db')),
      H2H_BASE_URL: sims.get('default').baseUrl,
      H2H_API_KEY: DEMO_KEY,
      H2H_API_SECRET: DEMO_SECRET,
      H2H_UPSTREAMS_FILE: upstreamsFile,
      H2H_UPSTREAM_BETA_API_KEY: BETA_KEY,
      H2H_UPSTREAM_BETA_API_SECRET: BETA_SECRET,
      H2H_ROUTING_POLICY: 'cheapest',
    });
    const logger = pino({ level: 'silent' });
    // Started before the worker, so it is stopped after it: the notifier may be delivering.
    const shop = await startDemoShop();
    stops.push(() => shop.close());
    const receiver = await startReceiver(receiverSettings(config), { logger });
    stops.push(() => receiver.close());
    await control('default', 'PATCH', '/members/M-0001', { webhook_url: receiver.webhookUrl });
    await control('beta', 'PATCH', '/members/B-0001', { webhook_url: `${receiver.webhookUrl}/beta` });
    const worker = await startWorkerProcess(config, { logger });
    stops.push(() => worker.close());
    const api = await startApi(config, { logger });
    stops.push(() => api.close());
    const { store } = worker;

    const started = Date.now();
    const timeLeft = () => timeoutMs - (Date.now() - started);
    // The shop API routes from each upstream's synced catalog: the worker's first refresh of both.
    while (
      (await store.catalog.candidates({ code: UPSTREAMS_DEMO_PRODUCT })).length < DEMO_UPSTREAMS.length
    ) {
      if (timeLeft() <= 0) throw new Error('the demo timed out before both upstreams’ catalogs were synced');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const { token } = await store.tokens.create('demo shop', ['orders:write', 'orders:read']);
    const endpoint = await addEndpoint(store, shop.url, 'order.*');
    shop.trust(endpoint.secret);

    const placed: string[] = [];
    const place = async (count: number) => {
      for (let i = 0; i < count; i++) {
        const partnerRef = newPartnerRef();
        const answer = await request(`${api.origin}/v1/orders`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            product_code: UPSTREAMS_DEMO_PRODUCT,
            // An ordinary user id (no magic suffix, docs/simulator.md): PENDING → SUCCESS, or on
            // beta FAILED at its fail_ratio.
            data: { user_id: `${1_000_000 + placed.length}0010`, server_id: '2001' },
            partner_ref: partnerRef,
          }),
        });
        const text = await answer.body.text();
        if (answer.statusCode !== 202) throw new Error(`POST /v1/orders: ${answer.statusCode} ${text}`);
        placed.push(partnerRef);
      }
    };

    const compare = async (): Promise<UpstreamsDemoRow[]> => {
      const upstreams = new Map<string, Order[]>();
      for (const name of DEMO_UPSTREAMS)
        upstreams.set(name, (await control(name, 'GET', '/orders')) as Order[]);
      return Promise.all(
        placed.map(async (partnerRef) =>
          compareOrderViews({
            partnerRef,
            local: await store.queries.getPublicOrderByPartnerRef(partnerRef),
            skipped: (await store.queries.getOrderByPartnerRef(partnerRef))?.route?.skipped ?? [],
            upstreams,
            held: shop.orders.get(partnerRef),
          }),
        ),
      );
    };
    const agreeing = (rows: UpstreamsDemoRow[]) => rows.filter((r) => r.agrees).length;
    const settle = async () => {
      let rows = await compare();
      while (agreeing(rows) < rows.length && timeLeft() > 0) {
        options.onProgress?.(agreeing(rows), rows.length, Date.now() - started);
        // Looked at again on the shop's next notification, or after half a second at the latest.
        await shop.nextNotification(500);
        rows = await compare();
      }
      options.onProgress?.(agreeing(rows), rows.length, Date.now() - started);
      return rows;
    };

    // The rush: placed in a few milliseconds, before beta (whose creates the pump sends one at a
    // time, each answered after create_response_delay_ms) has accepted a single one, so all are
    // routed to beta; its balance covers eight, so the rest are refused there and go on to default.
    await place(options.rush ?? 16);
    await settle();
    // Beta's balance is now below the price in h2h-sync's ledger, and new orders go straight to
    // default; unless a FAILED order of beta's was credited back after the rush's last create
    // (realistic timings), which leaves beta room for one more.
    await place(options.later ?? 4);
    const rows = await settle();
    const elapsedMs = Date.now() - started;

    const balances: UpstreamBalanceAtEnd[] = [];
    for (const name of DEMO_UPSTREAMS) {
      const [member] = (await control(name, 'GET', '/members')) as Array<{ balance: number }>;
      balances.push({
        upstream: name,
        simulator: member!.balance,
        accounted: (await store.balance.viewOf(name)).balance,
      });
    }
    const local = await Promise.all(placed.map((ref) => store.queries.getPublicOrderByPartnerRef(ref)));
    return {
      rows,
      totals: totalsOf(rows, local),
      allAgree: agreeing(rows) === rows.length,
      elapsedMs,
      balances,
      shop: {
        notifications: { ...shop.counts },
        orders: placed.flatMap((ref) => shop.orders.get(ref) ?? []),
      },
      policy: 'cheapest',
      faults: DEMO_FAULTS,
      profile,
      timeScale,
      seed,
    };
  } finally {
    for (const stop of stops.reverse()) await Promise.resolve(stop()).catch(() => {});
  }
}
