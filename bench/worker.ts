/**
 * Event-worker throughput (issue 4: at least 5,000 events/s, and at least 0.5× a no-op BullMQ
 * worker draining the same queue in the same run).
 *
 * A private redis-server (AOF, `appendfsync everysec`, as production wants it) holds two
 * identical pre-filled queues of N valid webhook jobs, each a distinct order and event, queued
 * as the receiver queues them (same job ids, options and payload). Then, one after the other:
 * 1. a no-op BullMQ worker at the same concurrency drains the first queue (the ceiling BullMQ
 *    and Redis allow on this machine);
 * 2. the event worker drains the second into a fresh store on the project's disk: a SQLite file
 *    (`synchronous=FULL`), or a private PostgreSQL server (fsync and `synchronous_commit` on), or,
 *    with `--store both`, each in turn from queues filled alike (side by side in one run).
 * Each rate is jobs completed / time from `run()` to the last completion.
 *
 *   npm run bench:worker -- [--events 50000] [--concurrency 100] [--batch 100] [--store sqlite|postgres|both]
 *                           [--min-rate 5000] [--min-ratio 0.5]
 *
 * The goals apply to every store run.
 *
 * Prints both rates, the ratio and the group-commit figures; exits 1 below either goal or when
 * the store does not hold exactly one event per job.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { startRedisServer } from '../src/dev/redis-server.js';
import {
  encodeWebhookRawBody,
  WEBHOOK_JOB_OPTIONS,
  WEBHOOK_QUEUE,
  type WebhookJobData,
  webhookIdentity,
} from '../src/queue/webhook-queue.js';
import { openStore } from '../src/store/open-store.js';
import { DEFAULT_WORKER_CONCURRENCY } from '../src/worker/defaults.js';
import { createEventWorker } from '../src/worker/event-worker.js';
import { benchStore, benchStoreKinds } from './bench-store.js';

const { values: flags } = parseArgs({
  options: {
    events: { type: 'string', default: '50000' },
    concurrency: { type: 'string', default: String(DEFAULT_WORKER_CONCURRENCY) },
    batch: { type: 'string' },
    'min-rate': { type: 'string', default: '5000' },
    'min-ratio': { type: 'string', default: '0.5' },
    store: { type: 'string', default: 'sqlite' },
  },
});
const STORES = benchStoreKinds(flags.store);
const EVENTS = Number(flags.events);
const CONCURRENCY = Number(flags.concurrency);
const BATCH = Number(flags.batch ?? flags.concurrency);
const MIN_RATE = Number(flags['min-rate']);
const MIN_RATIO = Number(flags['min-ratio']);

/** One webhook as the simulator sends it: a settled SUCCESS of its own order. */
function webhookJob(n: number, runId: string): { jobId: string; name: string; data: WebhookJobData } {
  const ref = `bench-${runId}-${n}`;
  const eventId = `evt_${runId}_${n}`;
  const rawBody = Buffer.from(
    JSON.stringify({
      event_id: eventId,
      event: 'order.updated',
      created_at: '2026-11-21T10:00:02.000Z',
      data: {
        invoice_number: `INV-${ref}`,
        partner_ref: ref,
        status: 'SUCCESS',
        amount: 19_500,
        target: '12345678(2001)',
        product_name: 'Mobile Legends 86 Diamonds',
        product_code: 'MLBB-86',
        serial_number: `SN-${n}`,
        nickname: 'PlayerOne',
        message: null,
        created_at: '2026-11-21T10:00:00.000Z',
        success_at: '2026-11-21T10:00:02.000Z',
      },
    }),
  );
  const identity = webhookIdentity(rawBody);
  return {
    jobId: identity.jobId,
    name: identity.jobName,
    data: {
      dedupeKey: identity.dedupeKey,
      eventId,
      ...encodeWebhookRawBody(rawBody),
      receivedAt: Date.now(),
      headers: { timestamp: Math.floor(Date.now() / 1000), eventType: 'order.updated' },
    },
  };
}

async function prefill(redisUrl: string, prefix: string): Promise<void> {
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const queue = new Queue<WebhookJobData>(WEBHOOK_QUEUE, { connection, prefix });
  for (let start = 0; start < EVENTS; start += 1_000) {
    const jobs = [];
    for (let n = start; n < Math.min(EVENTS, start + 1_000); n++) {
      const { jobId, name, data } = webhookJob(n, prefix);
      jobs.push({ name, data, opts: { ...WEBHOOK_JOB_OPTIONS, jobId } });
    }
    await queue.addBulk(jobs);
  }
  const waiting = await queue.getWaitingCount();
  if (waiting !== EVENTS) throw new Error(`pre-fill left ${waiting} waiting jobs, expected ${EVENTS}`);
  await queue.close();
  connection.disconnect();
}

/** Runs `worker` until `EVENTS` jobs completed; returns jobs/s. */
async function drain(worker: Worker, label: string): Promise<number> {
  let completed = 0;
  let failed = 0;
  let started = 0;
  const done = new Promise<void>((resolve, reject) => {
    worker.on('completed', () => {
      completed += 1;
      if (completed === EVENTS) resolve();
    });
    worker.on('failed', (_job, error) => {
      failed += 1;
      reject(new Error(`${label}: a job failed: ${error.message}`));
    });
  });
  await worker.waitUntilReady();
  started = performance.now();
  void worker.run();
  await done;
  const seconds = (performance.now() - started) / 1000;
  if (failed > 0) throw new Error(`${label}: ${failed} jobs failed`);
  return EVENTS / seconds;
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

async function main(): Promise<number> {
  const redis = await startRedisServer();
  // On the project's disk (not tmpfs), like the real store; var/ does not exist on a fresh clone.
  mkdirSync(join(process.cwd(), 'var'), { recursive: true });
  const dir = mkdtempSync(join(process.cwd(), 'var', 'bench-worker-'));
  try {
    console.log(
      `bench:worker — ${EVENTS.toLocaleString('en-US')} events, concurrency ${CONCURRENCY}, batch ≤ ${BATCH}; ` +
        `${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.versions.node}; ` +
        `load ${loadavg()
          .map((l) => l.toFixed(2))
          .join(' ')}`,
    );
    await prefill(redis.url, 'noop');
    for (const kind of STORES) await prefill(redis.url, kind);

    const noopConnection = new Redis(redis.url, { maxRetriesPerRequest: null });
    const noop = new Worker(WEBHOOK_QUEUE, async () => undefined, {
      connection: noopConnection,
      prefix: 'noop',
      concurrency: CONCURRENCY,
      autorun: false,
    });
    const noopRate = await drain(noop, 'no-op worker');
    await noop.close();
    noopConnection.disconnect();
    console.log(`no-op BullMQ worker: ${fmt(noopRate)} jobs/s`);

    const problems: string[] = [];
    for (const kind of STORES) {
      const { url, stop } = await benchStore(kind, dir);
      try {
        const store = await openStore(url, { role: 'bench' });
        const events = createEventWorker({
          writer: store.writer,
          redisUrl: redis.url,
          prefix: kind,
          concurrency: CONCURRENCY,
          maxBatchSize: BATCH,
          autorun: false,
        });
        const rate = await drain(events.worker, `event worker (${kind})`);
        const stats = events.stats();
        await events.close();
        const stored = (await store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM order_events'))!.n;
        await store.close();
        const ratio = rate / noopRate;
        const label = kind === 'sqlite' ? 'SQLite, synchronous=FULL' : 'PostgreSQL, synchronous_commit=on';
        console.log(`event worker:        ${fmt(rate)} events/s applied (${label})`);
        console.log(
          `ratio:               ${ratio.toFixed(2)}× the no-op drain; ${stats.commits.toLocaleString('en-US')} commits, ` +
            `${(stats.committed / stats.commits).toFixed(1)} events per commit on average, largest ${stats.largestBatch}; ${fmt(stats.busyMs)} ms in the store`,
        );
        if (stored !== EVENTS) problems.push(`${kind}: the store holds ${stored} events, expected ${EVENTS}`);
        if (rate < MIN_RATE)
          problems.push(`${kind}: ${fmt(rate)} events/s is below the goal of ${fmt(MIN_RATE)}`);
        if (ratio < MIN_RATIO)
          problems.push(`${kind}: a ratio of ${ratio.toFixed(2)} is below the goal of ${MIN_RATIO}`);
      } finally {
        await stop();
      }
    }
    console.log(
      `load after:          ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
    for (const problem of problems) console.error(`FAIL: ${problem}`);
    return problems.length === 0 ? 0 : 1;
  } finally {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
