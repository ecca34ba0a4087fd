import { DelayedError, type JobsOptions, Queue, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { DEFAULT_QUEUE_PREFIX } from '../queue/webhook-queue.js';
import { BudgetExhaustedError } from '../rate-budget/rate-budget.js';
import { settlesWithin } from '../shared/deadline.js';
import { DEFAULT_SHUTDOWN_TIMEOUT_MS } from '../shared/defaults.js';
import { watchedRedis } from '../shared/redis-outage.js';
import type { OrderStore } from '../store/order-store.js';
import type { UpstreamClient } from '../upstream/client.js';
import { DEFAULT_UPSTREAM, isDefaultUpstream } from '../upstream/model.js';
import { type CatalogSyncSummary, syncCatalog } from './catalog-sync.js';

/** Name of the BullMQ queue of the default upstream's catalog refreshes. */
export const CATALOG_QUEUE = 'h2h-catalog';
/** Name of every refresh job. */
export const CATALOG_JOB_NAME = 'catalog-refresh';
/**
 * Id of the job scheduler that adds a refresh of the default upstream's catalog every
 * `CATALOG_REFRESH_S`; the same in every process.
 */
export const CATALOG_SCHEDULER_ID = 'h2h-catalog-every';

/**
 * The queue and scheduler of `upstream`'s refreshes: the default upstream's are
 * {@link CATALOG_QUEUE} and {@link CATALOG_SCHEDULER_ID}, unchanged since there was one upstream;
 * another's carry its name (`h2h-catalog@beta`, `h2h-catalog-every@beta`; a name has no `@`).
 */
export function catalogRefreshNames(upstream: string = DEFAULT_UPSTREAM): {
  queue: string;
  schedulerId: string;
} {
  return isDefaultUpstream(upstream)
    ? { queue: CATALOG_QUEUE, schedulerId: CATALOG_SCHEDULER_ID }
    : { queue: `${CATALOG_QUEUE}@${upstream}`, schedulerId: `${CATALOG_SCHEDULER_ID}@${upstream}` };
}

/**
 * A refresh that fails (the upstream down) is tried again twice, a minute apart; after that the
 * next scheduled one comes. A spent poll share delays the job instead, without an attempt.
 */
export const CATALOG_JOB_OPTIONS = {
  attempts: 3,
  backoff: { type: 'fixed', delay: 60_000 },
  removeOnComplete: { count: 20 },
  removeOnFail: { count: 20 },
} as const satisfies JobsOptions;

export interface StartCatalogRefreshOptions {
  store: OrderStore;
  /**
   * The upstream whose catalog and balance it refreshes (docs/upstreams.md), with its own queue
   * and scheduler ({@link catalogRefreshNames}). Default: `default`.
   */
  upstream?: string;
  /** That upstream's client, with its rate budget. */
  client: UpstreamClient;
  /** How often, in ms (CATALOG_REFRESH_S); 0 removes the scheduler and starts nothing. */
  everyMs: number;
  redisUrl: string;
  /** BullMQ key prefix. Default: `bull`. */
  queuePrefix?: string;
  logger?: Logger;
  /** Called after each refresh this process ran. */
  onRefresh?: (summary: CatalogSyncSummary) => void;
}

/** A running catalog refresh; `close` leaves the scheduler in Redis for the other processes. */
export interface RunningCatalogRefresh {
  close(options?: { timeoutMs?: number }): Promise<boolean>;
}

/**
 * Refreshes one upstream's local catalog and balance on a schedule (docs/operations.md, "Catalog
 * refresh"): upserts that upstream's job scheduler (`h2h-catalog-every` for the default upstream;
 * BullMQ runs its first job at once, then every `everyMs`; every worker upserts the same one, so
 * there is one tick however many run) and a worker of concurrency 1 on its queue that runs
 * {@link syncCatalog} at the poll priority. With `everyMs` 0 it removes the scheduler, so no
 * refresh is scheduled until a worker sets one again. A process runs one per upstream.
 */
export async function startCatalogRefresh(
  options: StartCatalogRefreshOptions,
): Promise<RunningCatalogRefresh> {
  const { store, client } = options;
  const upstream = options.upstream ?? DEFAULT_UPSTREAM;
  const names = catalogRefreshNames(upstream);
  const logger = isDefaultUpstream(upstream) ? options.logger : options.logger?.child({ upstream });
  const prefix = options.queuePrefix ?? DEFAULT_QUEUE_PREFIX;
  const { connection, outage } = watchedRedis({
    url: options.redisUrl,
    component: 'catalog refresh',
    logger,
    redis: { maxRetriesPerRequest: null, connectionName: names.queue },
  });
  const queue = new Queue(names.queue, { connection, prefix });
  queue.on('error', outage.error);

  if (options.everyMs === 0) {
    try {
      await queue.removeJobScheduler(names.schedulerId);
    } finally {
      await settlesWithin(queue.close(), 1_000);
      connection.disconnect();
    }
    logger?.info('catalog refresh off (CATALOG_REFRESH_S=0): only `h2h-sync catalog sync` refreshes it');
    return { close: async () => true };
  }

  const worker = new Worker<unknown, CatalogSyncSummary>(
    names.queue,
    async (job, token) => {
      try {
        const summary = await syncCatalog({ store, upstream, client, priority: 'poll' });
        logger?.info(
          {
            products: summary.products,
            priceChanges: summary.price_changes.length,
            balance: summary.balance.balance,
            drift: summary.drift?.drift,
          },
          'catalog refreshed',
        );
        if (summary.drift?.drift_since) {
          logger?.warn(
            { drift: summary.drift },
            `balance drift: the profile balance differs from the expected one by ${summary.drift.unexplained_drift} no open order explains (docs/operations.md, "Balance drift")`,
          );
        }
        options.onRefresh?.(summary);
        return summary;
      } catch (error) {
        if (!(error instanceof BudgetExhaustedError)) throw error;
        // Not a failure: the poll share is spent for now; try again when a slot frees.
        await job.moveToDelayed(Date.now() + error.retryAfterMs + 10, token);
        throw new DelayedError();
      }
    },
    { connection, prefix, concurrency: 1, autorun: false },
  );
  worker.on('failed', (job, error) =>
    logger?.warn({ jobId: job?.id, err: error }, 'catalog refresh failed; it is tried again'),
  );
  worker.on('error', outage.error);
  try {
    await queue.upsertJobScheduler(
      names.schedulerId,
      { every: options.everyMs },
      { name: CATALOG_JOB_NAME, data: {}, opts: CATALOG_JOB_OPTIONS },
    );
    void worker.run();
    await worker.waitUntilReady();
  } catch (error) {
    await settlesWithin(Promise.all([worker.close(true), queue.close()]), 2_000);
    connection.disconnect();
    throw error;
  }

  let closing: Promise<boolean> | undefined;
  return {
    close({ timeoutMs = DEFAULT_SHUTDOWN_TIMEOUT_MS } = {}) {
      closing ??= (async () => {
        const graceful = await settlesWithin(worker.close(), timeoutMs);
        await settlesWithin(queue.close(), 1_000);
        connection.disconnect();
        return graceful;
      })();
      return closing;
    },
  };
}
