// Issue 29, "Volume": the store's reads and steps at 10 thousand, 1 million and 10 million orders.
//
//   npm run bench:volume [-- --sizes 10000,1000000,10000000 --store both --reps 15 --keep --reuse --explain]
//
// For each backend and size it builds a store under var/volume/ (bench/volume-loader.ts: the
// write path's orders, copied), opens it as the processes do, and times (median of --reps after
// warm-up) each read and step below; then prints each size's figures and the ratio of the
// largest size to the smallest side by side, the store's size on disk, and (--explain) the plan
// of each hot query. The goal: every figure at the largest size within 2× the smallest's.
// Stores are deleted at the end unless --keep; --reuse measures a store a --keep run left.
import { existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { storeStatusReport } from '../src/cli/commands/status-actions.js';
import { loadConfig, reconcilerSettings } from '../src/config/config.js';
import { GroupCommit } from '../src/shared/group-commit.js';
import { type OpenedStore, openStore } from '../src/store/open-store.js';
import { type ClaimingStore, withClaims } from '../src/store/order-store.js';
import type { ApplyItem, ApplyResult } from '../src/store/order-writer.js';
import { applyWebhookJob } from '../src/worker/event-worker.js';
import { type BenchStoreKind, benchStore, benchStoreKinds } from './bench-store.js';
import { loadVolumeStore } from './volume-loader.js';
import { VOLUME_KINDS, volumeBase, volumeKind, volumeRef, volumeWebhookJob } from './volume-orders.js';
import { explainHotQueries } from './volume-queries.js';

const { values: flags } = parseArgs({
  options: {
    sizes: { type: 'string', default: '10000,1000000,10000000' },
    store: { type: 'string', default: 'both' },
    reps: { type: 'string', default: '15' },
    'retention-d': { type: 'string', default: '30' },
    keep: { type: 'boolean', default: false },
    reuse: { type: 'boolean', default: false },
    explain: { type: 'boolean', default: false },
    'max-ratio': { type: 'string', default: '2' },
  },
});

const sizes = flags.sizes.split(',').map((s) => Number(s.replace(/_/g, '')));
if (sizes.some((n) => !Number.isInteger(n) || n < VOLUME_KINDS)) {
  throw new Error(`--sizes must be whole numbers ≥ ${VOLUME_KINDS}, got ${flags.sizes}`);
}
const reps = Number(flags.reps);
const retentionMs = Number(flags['retention-d']) * 86_400_000;
const maxRatio = Number(flags['max-ratio']);
const root = resolve('var', 'volume');

type Figures = Record<string, number>;

/**
 * Runs of each step before the measured ones: a store just opened answers its first calls slower
 * (PostgreSQL's connections prepare their statements, caches warm), and a process that has run
 * for a while is what the figures are about.
 */
const WARM_UP = 5;

/** The median of `reps` runs of `step` after {@link WARM_UP} unmeasured ones, in ms. */
async function time(step: (rep: number) => Promise<unknown>): Promise<number> {
  const runs: number[] = [];
  for (let rep = -WARM_UP; rep < reps; rep++) {
    const start = process.hrtime.bigint();
    await step(rep + WARM_UP);
    if (rep >= 0) runs.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  runs.sort((a, b) => a - b);
  return runs[Math.floor(runs.length / 2)]!;
}

function log(text: string): void {
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${text}\n`);
}

/** The size of the store on disk, bytes. */
async function diskBytes(store: OpenedStore, path: string | undefined): Promise<number> {
  if (path) return [path, `${path}-wal`].filter(existsSync).reduce((sum, f) => sum + statSync(f).size, 0);
  const row = await store.db.get<{ n: number }>('SELECT pg_database_size(current_database()) AS n');
  return Number(row?.n ?? 0);
}

async function measure(kind: BenchStoreKind, n: number): Promise<{ figures: Figures; plans: string }> {
  const dir = join(root, `${kind}-${n}`);
  const built = existsSync(join(dir, 'built'));
  if (!flags.reuse || !built) rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const server = await benchStore(kind, dir);
  const end = volumeBase(n);
  try {
    const figures: Figures = {};
    if (!flags.reuse || !built) {
      const started = Date.now();
      let last = started;
      await loadVolumeStore(server.url, n, {
        pruneBefore: end - retentionMs,
        onProgress: (done) => {
          if (Date.now() - last < 30_000 && done < n) return;
          last = Date.now();
          const s = (last - started) / 1000;
          log(`${kind} ${n}: ${done} orders in ${s.toFixed(0)} s (${Math.round(done / s)}/s)`);
        },
      });
      figures['build s'] = (Date.now() - started) / 1000;
      mkdirSync(join(dir, 'built'), { recursive: true });
    }
    // The store's clock: a minute after the last order, moved by the pruning's steps.
    let clock = end + 60_000;
    const opened = await openStore(server.url, { now: () => clock, role: 'bench' });
    const config = loadConfig({});
    const store: ClaimingStore<OpenedStore> = withClaims(opened, reconcilerSettings(config));
    try {
      const path = kind === 'sqlite' ? join(dir, 'h2h-sync.db') : undefined;
      figures['disk MB'] = (await diskBytes(opened, path)) / 1e6;
      const middle = Math.floor(n / 2);
      const firstSeq = (await store.feed.after(0, 1))[0]?.seq ?? 0;
      // A page far from the newest: 90 % of the orders are newer (at least 5,000 ids, so a page
      // of FAILED orders, 2 %, is full at every size).
      const deepId = Math.max(5000, Math.floor(n / 10));
      log(`${kind} ${n}: measuring`);
      figures['GET /v1/orders/:ref'] = await time((r) => store.queries.getPublicOrder(volumeRef(middle + r)));
      figures['GET /v1/orders?status=SUCCESS'] = await time(() =>
        store.queries.pageOrders({ status: 'SUCCESS', limit: 50 }),
      );
      figures['GET /v1/orders?status=FAILED&cursor (deep)'] = await time((r) =>
        store.queries.pageOrders({ status: 'FAILED', beforeId: deepId - r, limit: 50 }),
      );
      // A submission state no order of the mix has: the filter's index, never the table.
      figures['GET /v1/orders?status=cancelled (none)'] = await time(() =>
        store.queries.pageOrders({ status: 'cancelled', limit: 50 }),
      );
      figures['GET /v1/events?after=<oldest>'] = await time((r) => store.feed.after(firstSeq + r * 100, 100));
      figures['status --json (store)'] = await time(() => storeStatusReport(store, config, clock));
      // Its two parts that read orders: the counts with the oldest open order and the due count
      // (every open order: 0.5 % of the mix), and the audit window's SUCCESS orders (7 days of
      // them). Each grows with those orders, not with the store (docs/performance.md, "10 million
      // orders at schema 32").
      figures['status: counts, open orders'] = await time(() => store.queries.countByStatus(clock));
      const auditWindowMs = reconcilerSettings(config).auditWindowMs;
      figures['status: audit coverage (window)'] = await time(() =>
        store.queries.auditCoverage(auditWindowMs, clock),
      );
      figures['reconcile pass planning'] = await time(async () => {
        await store.queries.countByStatus(clock, store.claims.upstream);
        await store.circuit.state();
        const claimed = await store.claims.claimDueForPoll(10, { dueBy: clock });
        for (const order of claimed) await store.claims.releaseClaim(order.partnerRef, order.claim);
      });
      // The open orders, newest first: each repetition's webhook finishes one (of a kept store,
      // one an earlier run has not finished already).
      const open: number[] = [];
      for (let i = n - 1; i >= 0 && open.length < reps + WARM_UP; i--) {
        if (volumeKind(i).open && (await store.queries.getOrder(volumeRef(i)))?.nextPollAt != null)
          open.push(i);
      }
      const commit = new GroupCommit<ApplyItem, ApplyResult>({
        runBatch: (items) => store.writer.applyBatch(items),
      });
      figures['worker apply (1 webhook)'] = await time((r) =>
        applyWebhookJob(volumeWebhookJob(open[r]!, 'SUCCESS', VOLUME_KINDS, clock), commit),
      );
      // Each measured repetition prunes the next hour past the retention (600 orders' events), as
      // the worker's hourly pruning does; the unmeasured ones prune nothing (up to the feed's
      // first event), so the measured hours are the feed's first 15, inside even the 10-thousand
      // store's 16.7 hours. (A kept store's feed starts where an earlier run's pruning left it.)
      const first = (await store.feed.after(0, 1))[0];
      const oldest = first ? Date.parse(String(first.timestamp)) : end;
      figures['feed prune (1 h)'] = await time(async (r) => {
        clock = oldest + retentionMs + Math.max(0, r - WARM_UP + 1) * 3_600_000;
        await store.feed.prune(retentionMs);
      });
      clock = end + 60_000;
      const plans = flags.explain
        ? await explainHotQueries(store, { ref: volumeRef(middle), deepId, now: clock, firstSeq })
        : '';
      return { figures, plans };
    } finally {
      await opened.close();
    }
  } finally {
    await server.stop();
    if (!flags.keep) rmSync(dir, { recursive: true, force: true });
  }
}

const format = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(3));

let failed = false;
for (const kind of benchStoreKinds(flags.store)) {
  const results: Figures[] = [];
  for (const n of sizes) {
    const { figures, plans } = await measure(kind, n);
    results.push(figures);
    if (plans) console.log(`\n${kind}, ${n.toLocaleString('en')} orders, query plans:\n${plans}`);
  }
  const header = [
    '',
    ...sizes.map((n) => n.toLocaleString('en')),
    `${sizes.at(-1)!.toLocaleString('en')} / ${sizes[0]!.toLocaleString('en')}`,
  ];
  console.log(`\n${kind} (ms, median of ${reps}):`);
  console.log(`| ${header.join(' | ')} |\n|${header.map(() => '---').join('|')}|`);
  for (const key of Object.keys(results.at(-1)!)) {
    const values = results.map((r) => r[key]);
    const first = values[0];
    const lastValue = values.at(-1)!;
    const ratio = first ? lastValue / first : Number.NaN;
    const timed = !key.includes('MB') && !key.includes('build');
    if (timed && sizes.length > 1 && ratio > maxRatio) failed = true;
    console.log(
      `| ${key} | ${values.map((v) => (v === undefined ? '–' : format(v))).join(' | ')} | ${Number.isFinite(ratio) ? `${ratio.toFixed(2)}×${timed && ratio > maxRatio ? ' ✗' : ''}` : '–'} |`,
    );
  }
}
if (failed) {
  console.log(`\nSome step at the largest size took more than ${maxRatio}× its time at the smallest.`);
  process.exitCode = 1;
}
