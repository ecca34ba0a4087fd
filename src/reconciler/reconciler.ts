import { DelayedError, type Job, Queue, UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { ReconcilerSettings } from '../config/config.js';
import { POLL_REQUEST_QUEUE, type PollRequestData } from '../queue/poll-request-queue.js';
import { DEFAULT_QUEUE_PREFIX } from '../queue/webhook-queue.js';
import type { RateBudget } from '../rate-budget/rate-budget.js';
import { settlesWithin } from '../shared/deadline.js';
import { RedisLease } from '../shared/redis-lease.js';
import { watchedRedis } from '../shared/redis-outage.js';
import type { ClaimingStore } from '../store/order-store.js';
import type { UpstreamClient } from '../upstream/client.js';
import { type EarlyPollResult, pollOrderNow } from './early-poll.js';
import { relearnPace } from './learn-pace.js';
import { createReconcilerMetrics, type ReconcilerMetrics } from './metrics.js';
import type { ReconcilerDeps } from './poll-order.js';
import { type ReconcilePassSummary, runReconcilePass } from './reconcile-pass.js';
import {
  RECONCILE_CONTINUE_ID,
  RECONCILE_JOB_NAME,
  RECONCILE_JOB_OPTIONS,
  RECONCILE_PASS_LOCK_KEY,
  RECONCILE_QUEUE,
  RECONCILE_SCHEDULER_ID,
  type ReconcileJobData,
} from './reconcile-queue.js';

/** Default longest wait of {@link RunningReconciler.close} for BullMQ (whose close has no timeout of its own). */
export const DEFAULT_RECONCILER_CLOSE_TIMEOUT_MS = 10_000;

export interface StartReconcilerOptions {
  /**
   * `reconcilerSettings(config)`, or the same shape in ms (tests scale it down): the pass
   * interval and size. When each order is polled is the store's (`next_poll_at`, by the rules of
   * domain/poll-rules.ts).
   */
  settings: Pick<ReconcilerSettings, 'everyMs' | 'passSize'>;
  /** A store with the claims on orders (`withClaims(store, reconcilerSettings(config))`). */
  store: ClaimingStore;
  /** The upstream client with the shared rate budget. */
  client: UpstreamClient;
  /** The budget the client draws from; read for the pass summaries. Default: none. */
  budget?: RateBudget;
  /** Redis of the queues and the pass lock. The reconciler opens and closes its own connections. */
  redisUrl: string;
  /** BullMQ key prefix; must match the receiver's for the poll requests. Default: `bull`. */
  queuePrefix?: string;
  logger?: Logger;
  /** Metrics to count in. Default: new ones, in `registry` when given. */
  metrics?: ReconcilerMetrics;
  /** Registry for new metrics (the worker process's). Default: a registry of their own. */
  registry?: Registry;
  /** Called after every pass this process ran (or skipped because another held the lock). */
  onPass?: (summary: ReconcilePassSummary) => void;
  /** The clock, in ms; give the store the same one. Default: `Date.now`. */
  now?: () => number;
  /** Redis key of the pass lock. Default: {@link RECONCILE_PASS_LOCK_KEY}. */
  lockKey?: string;
}

/** A running reconciler. */
export interface RunningReconciler {
  readonly metrics: ReconcilerMetrics;
  /** Runs one pass now, under the same lock as the scheduled ones. */
  runPassNow(trigger?: string): Promise<ReconcilePassSummary>;
  /**
   * Removes nothing from Redis (the scheduler stays for the other processes), stops taking jobs,
   * lets an active pass or poll finish, and closes its connections; gives up waiting after
   * `timeoutMs` (default {@link DEFAULT_RECONCILER_CLOSE_TIMEOUT_MS}). Resolves true when it
   * stopped gracefully, false when it had to give up waiting (an abandoned pass's claims expire
   * with their lease). Safe to call twice.
   */
  close(options?: { timeoutMs?: number }): Promise<boolean>;
}

/**
 * Starts the reconciler in this process (docs/reconciler.md):
 * - registers the job scheduler `h2h-reconcile-every` (every `settings.everyMs`) on the queue
 *   `h2h-reconcile`; every process upserts the same one, so there is one tick however many run;
 * - starts a BullMQ worker (concurrency 1) that runs each pass job under the Redis pass lock,
 *   so one pass runs at a time across processes; orders are also claimed in SQLite, so no two
 *   processes poll one order at once. When a pass ends with orders still due (budget spent, or
 *   the pass size reached), one follow-up pass is queued for when a poll slot frees;
 * - starts a BullMQ worker on `h2h-poll-requests` that polls single orders early (stale but
 *   authentic webhooks); a request that meets a spent budget is delayed, not failed.
 * Resolves once both workers are connected.
 */
export async function startReconciler(options: StartReconcilerOptions): Promise<RunningReconciler> {
  const { settings, store, client, budget, logger } = options;
  if (!(settings.everyMs >= 100)) throw new RangeError(`everyMs must be ≥ 100, got ${settings.everyMs}`);
  if (!Number.isInteger(settings.passSize) || settings.passSize < 1) {
    throw new RangeError(`passSize must be a whole number ≥ 1, got ${settings.passSize}`);
  }

  const prefix = options.queuePrefix ?? DEFAULT_QUEUE_PREFIX;
  const metrics =
    options.metrics ??
    createReconcilerMetrics({
      queries: store.queries,
      circuit: store.circuit,
      auditWindowMs: store.claims.settings.auditWindowMs,
      ...(options.registry ? { registry: options.registry } : {}),
    });
  const deps: ReconcilerDeps = {
    store,
    client,
    settings,
    metrics,
    ...(logger ? { logger } : {}),
    ...(options.now ? { now: options.now } : {}),
  };

  // BullMQ workers need maxRetriesPerRequest: null; they duplicate this for their blocking calls.
  const { connection, outage } = watchedRedis({
    url: options.redisUrl,
    component: 'reconciler',
    logger,
    redis: { maxRetriesPerRequest: null, connectionName: 'h2h-reconciler' },
  });
  const lock = new RedisLease(connection, { key: options.lockKey || RECONCILE_PASS_LOCK_KEY });
  const queue = new Queue<ReconcileJobData>(RECONCILE_QUEUE, { connection, prefix });
  queue.on('error', outage.error);

  const runPass = async (trigger: string): Promise<ReconcilePassSummary> => {
    const summary = await runReconcilePass(deps, { lock, trigger, ...(budget ? { budget } : {}) });
    options.onPass?.(summary);
    return summary;
  };

  const passWorker = new Worker<ReconcileJobData, ReconcilePassSummary>(
    RECONCILE_QUEUE,
    async (job) => {
      const summary = await runPass(job.data.trigger ?? 'schedule');
      if (summary.stoppedBy === 'unauthorized' || summary.stoppedBy === 'base_url') {
        // Kept in the failed set, so Bull Board shows it too; retrying cannot help until the
        // configuration is fixed (the circuit's probe tells, at each pass).
        throw new UnrecoverableError(summary.error?.message ?? 'the upstream refused the API key');
      }
      return summary;
    },
    { connection, prefix, concurrency: 1, autorun: false },
  );
  passWorker.on('completed', (_job, summary) => {
    // Added once the pass's own job is finished, so the deduplication id is free again: at most
    // one follow-up pass waits at any time.
    if (!summary || summary.dueAfter === 0) return;
    if (summary.stoppedBy !== 'budget' && summary.stoppedBy !== 'pass_size') return;
    const delay = summary.stoppedBy === 'budget' ? (summary.retryAfterMs ?? 1000) + 10 : 0;
    queue
      .add(
        RECONCILE_JOB_NAME,
        { trigger: 'continue' },
        { ...RECONCILE_JOB_OPTIONS, delay, deduplication: { id: RECONCILE_CONTINUE_ID } },
      )
      .catch((error) =>
        logger?.warn({ err: error }, 'could not queue the follow-up pass; the scheduler runs the next'),
      );
  });
  passWorker.on('failed', (job, error) =>
    logger?.error({ jobId: job?.id, err: error }, 'reconciliation pass failed'),
  );
  passWorker.on('error', outage.error);

  const pollWorker = new Worker<PollRequestData, EarlyPollResult['kind']>(
    POLL_REQUEST_QUEUE,
    async (job: Job<PollRequestData>, token?: string) => {
      const ref = job.data.partnerRef ?? job.data.invoiceNumber;
      if (!ref) throw new UnrecoverableError('the poll request names no partner_ref or invoice number');
      const result = await pollOrderNow(deps, ref);
      if (result.kind !== 'kept') {
        logger?.debug({ ref, reason: job.data.reason, result: result.kind }, 'early poll done');
        return result.kind;
      }
      if (result.reason === 'budget' || result.reason === 'rate_limited') {
        // Not a failure: try again when a poll slot frees, without spending an attempt.
        await job.moveToDelayed(Date.now() + (result.retryAfterMs ?? 1000) + 10, token);
        throw new DelayedError();
      }
      if (result.reason === 'unauthorized') throw new UnrecoverableError(result.error.message);
      throw new Error(result.error.message); // 5xx or no answer: the job's backoff retries it
    },
    { connection, prefix, concurrency: 1, autorun: false },
  );
  pollWorker.on('error', outage.error);

  // The first-poll plans of this reconciler's settings and the pace recorded so far, before the
  // submission pump or anything else writes an order with them; each pass learns again. Under the
  // pass lock, as a pass learns: when another process holds it, its pass is learning now.
  const held = await lock.acquire();
  if (held) {
    try {
      await relearnPace(store, logger);
    } finally {
      await held.release();
    }
  }
  try {
    await queue.upsertJobScheduler(
      RECONCILE_SCHEDULER_ID,
      { every: settings.everyMs },
      { name: RECONCILE_JOB_NAME, data: { trigger: 'schedule' }, opts: RECONCILE_JOB_OPTIONS },
    );
    void passWorker.run();
    void pollWorker.run();
    await Promise.all([passWorker.waitUntilReady(), pollWorker.waitUntilReady()]);
  } catch (error) {
    await settlesWithin(Promise.all([passWorker.close(true), pollWorker.close(true), queue.close()]), 2_000);
    connection.disconnect();
    throw error;
  }
  logger?.info(
    {
      everyMs: settings.everyMs,
      firstPollDelayMs: store.claims.settings.firstPollDelayMs,
      passSize: settings.passSize,
    },
    'reconciler started',
  );

  let closing: Promise<boolean> | undefined;
  return {
    metrics,
    runPassNow: (trigger = 'manual') => runPass(trigger),
    close({ timeoutMs = DEFAULT_RECONCILER_CLOSE_TIMEOUT_MS } = {}) {
      closing ??= (async () => {
        const graceful = await settlesWithin(
          Promise.all([passWorker.close(), pollWorker.close()]),
          timeoutMs,
        );
        await settlesWithin(queue.close(), 1_000);
        connection.disconnect();
        if (!graceful)
          logger?.warn({ timeoutMs }, 'reconciler stop timed out; an abandoned pass’s claims expire');
        return graceful;
      })();
      return closing;
    },
  };
}
