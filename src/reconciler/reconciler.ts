import { Queue, UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { ReconcilerSettings } from '../config/config.js';
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
import { type PollRequestWorker, startPollRequestWorker } from './poll-requests.js';
import { type ReconcilePassSummary, runReconcilePass } from './reconcile-pass.js';
import {
  RECONCILE_JOB_NAME,
  RECONCILE_JOB_OPTIONS,
  type ReconcileJobData,
  reconcileNames,
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
  /**
   * A store with the claims on one upstream's orders (`withClaims(store, reconcilerSettings(config),
   * upstream)`): the reconciler polls that upstream's orders only, and its queue, scheduler and
   * pass lock are that upstream's ({@link reconcileNames}).
   */
  store: ClaimingStore;
  /** That upstream's client, with its rate budget. */
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
  /** Redis key of the pass lock. Default: the upstream's ({@link reconcileNames}). */
  lockKey?: string;
  /**
   * Whether this reconciler takes the early-poll requests itself. Default: true. A process with a
   * reconciler per upstream passes false to each and starts one {@link startPollRequestWorker}
   * with all of them, which hands each request to its upstream's.
   */
  takePollRequests?: boolean;
}

/** A running reconciler. */
export interface RunningReconciler {
  /** The upstream it reconciles (its store's `claims.upstream`). */
  readonly upstream: string;
  readonly metrics: ReconcilerMetrics;
  /** Polls one order of its upstream now, ahead of its schedule (`pollOrderNow`). */
  pollNow(ref: string): Promise<EarlyPollResult>;
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
 * Starts the reconciler of one upstream in this process (docs/reconciler.md); its Redis names
 * are that upstream's ({@link reconcileNames}: the default upstream's below):
 * - registers the job scheduler `h2h-reconcile-every` (every `settings.everyMs`) on the queue
 *   `h2h-reconcile`; every process upserts the same one, so there is one tick however many run;
 * - starts a BullMQ worker (concurrency 1) that runs each pass job under the Redis pass lock,
 *   so one pass runs at a time across processes; orders are also claimed in SQLite, so no two
 *   processes poll one order at once. When a pass ends with orders still due (budget spent, or
 *   the pass size reached), one follow-up pass is queued for when a poll slot frees;
 * - unless `takePollRequests` is false, starts a worker on `h2h-poll-requests` that polls single
 *   orders early (stale but authentic webhooks; {@link startPollRequestWorker}); a request that
 *   meets a spent budget is delayed, not failed.
 * Resolves once its workers are connected.
 */
export async function startReconciler(options: StartReconcilerOptions): Promise<RunningReconciler> {
  const { settings, store, client, budget, logger } = options;
  if (!(settings.everyMs >= 100)) throw new RangeError(`everyMs must be ≥ 100, got ${settings.everyMs}`);
  if (!Number.isInteger(settings.passSize) || settings.passSize < 1) {
    throw new RangeError(`passSize must be a whole number ≥ 1, got ${settings.passSize}`);
  }

  const prefix = options.queuePrefix ?? DEFAULT_QUEUE_PREFIX;
  const { upstream } = store.claims;
  const names = reconcileNames(upstream);
  const metrics =
    options.metrics ??
    createReconcilerMetrics({
      queries: store.queries,
      circuit: store.circuit,
      auditWindowMs: store.claims.settings.auditWindowMs,
      upstream,
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
  const lock = new RedisLease(connection, { key: options.lockKey || names.lockKey });
  const queue = new Queue<ReconcileJobData>(names.queue, { connection, prefix });
  queue.on('error', outage.error);

  const runPass = async (trigger: string): Promise<ReconcilePassSummary> => {
    const summary = await runReconcilePass(deps, {
      lock,
      trigger,
      ...(budget ? { budget } : {}),
    });
    options.onPass?.(summary);
    return summary;
  };

  const passWorker = new Worker<ReconcileJobData, ReconcilePassSummary>(
    names.queue,
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
        { ...RECONCILE_JOB_OPTIONS, delay, deduplication: { id: names.continueId } },
      )
      .catch((error) =>
        logger?.warn({ err: error }, 'could not queue the follow-up pass; the scheduler runs the next'),
      );
  });
  passWorker.on('failed', (job, error) =>
    logger?.error({ jobId: job?.id, err: error }, 'reconciliation pass failed'),
  );
  passWorker.on('error', outage.error);

  // Its upstream's first-poll plans of this reconciler's settings and the pace recorded so far,
  // before the submission pump or anything else writes an order with them; each pass learns
  // again. Under its pass lock, as a pass learns: when another process holds it, its pass is
  // learning now.
  const held = await lock.acquire();
  if (held) {
    try {
      await relearnPace(store, logger);
    } finally {
      await held.release();
    }
  }
  const pollNow = (ref: string) => pollOrderNow(deps, ref);
  let pollRequests: PollRequestWorker | undefined;
  try {
    await queue.upsertJobScheduler(
      names.schedulerId,
      { every: settings.everyMs },
      { name: RECONCILE_JOB_NAME, data: { trigger: 'schedule' }, opts: RECONCILE_JOB_OPTIONS },
    );
    void passWorker.run();
    await passWorker.waitUntilReady();
    if (options.takePollRequests ?? true) {
      pollRequests = await startPollRequestWorker({
        pollers: [{ upstream, pollNow }],
        redisUrl: options.redisUrl,
        queuePrefix: prefix,
        ...(logger ? { logger } : {}),
      });
    }
  } catch (error) {
    await settlesWithin(Promise.all([passWorker.close(true), queue.close()]), 2_000);
    connection.disconnect();
    throw error;
  }
  logger?.info(
    {
      upstream,
      everyMs: settings.everyMs,
      firstPollDelayMs: store.claims.settings.firstPollDelayMs,
      passSize: settings.passSize,
    },
    'reconciler started',
  );

  let closing: Promise<boolean> | undefined;
  return {
    upstream,
    metrics,
    pollNow,
    runPassNow: (trigger = 'manual') => runPass(trigger),
    close({ timeoutMs = DEFAULT_RECONCILER_CLOSE_TIMEOUT_MS } = {}) {
      closing ??= (async () => {
        const [passesStopped, pollsStopped] = await Promise.all([
          settlesWithin(passWorker.close(), timeoutMs),
          pollRequests?.close({ timeoutMs }) ?? true,
        ]);
        const graceful = passesStopped && pollsStopped;
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
