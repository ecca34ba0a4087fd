import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { ADMIN_QUEUES, type AdminServer, startAdminServer } from '../admin/admin-server.js';
import { registerBalanceMetrics } from '../catalog/balance-metrics.js';
import { startCatalogRefresh } from '../catalog/catalog-refresh.js';
import {
  adminSettings,
  apiSettings,
  type Config,
  catalogSettings,
  failoverSettings,
  loadConfig,
  notifySettings,
  reconcilerSettings,
  type WorkerSettings,
  workerSettings,
} from '../config/config.js';
import { type Notifier, startNotifier } from '../notify/notifier.js';
import type { NotifyMetrics } from '../notify/notify-metrics.js';
import { createLogger } from '../observability/logger.js';
import { registerSubmissionGauges } from '../orders/submission-metrics.js';
import { type SubmissionPump, startSubmissionPump } from '../orders/submission-pump.js';
import { moveOldNotificationQueue } from '../queue/old-notify-queue.js';
import { registerBudgetGauges } from '../rate-budget/budget-metrics.js';
import type { ReconcilerMetrics } from '../reconciler/metrics.js';
import { startPollRequestWorker } from '../reconciler/poll-requests.js';
import { reconcileNames } from '../reconciler/reconcile-queue.js';
import { type RunningReconciler, startReconciler } from '../reconciler/reconciler.js';
import { exitGracefully } from '../shared/graceful-shutdown.js';
import { redactRedisUrl } from '../shared/redis-outage.js';
import { openStore } from '../store/open-store.js';
import type { OrderStore } from '../store/order-store.js';
import { type ClaimingStore, withClaims } from '../store/order-store.js';
import { storeHealthMetrics } from '../store/store-health.js';
import { redactUrl } from '../store/store-url.js';
import { createUpstream, type Upstream } from '../upstream/create-upstream.js';
import { DEFAULT_UPSTREAM, isDefaultUpstream } from '../upstream/model.js';
import type { UpstreamAccount } from '../upstream/upstreams.js';
import { createEventWorker, type EventWorker } from './event-worker.js';
import { startRetention } from './store-retention.js';

/**
 * Added to H2H_WORKER_SHUTDOWN_TIMEOUT_MS for the whole stop: each component gets the timeout,
 * then the store closes.
 */
const STORE_CLOSE_MARGIN_MS = 1_000;

/** The components of one `h2h-sync worker` process. */
export interface RunningWorkerProcess {
  readonly settings: WorkerSettings;
  readonly store: OrderStore;
  readonly eventWorker: EventWorker;
  /** The shop notifications: the outbox filled from the feed and its deliveries (docs/api.md). */
  readonly notifier: Notifier;
  /**
   * The default upstream's reconciler's metrics, in the registry every upstream's reconciler
   * counts in (each under its `upstream` label); undefined when `RECONCILE_ENABLED=false`.
   */
  readonly reconcilerMetrics: ReconcilerMetrics | undefined;
  /** One reconciler per upstream account, in the configuration's order; empty when `RECONCILE_ENABLED=false`. */
  readonly reconcilers: readonly RunningReconciler[];
  /** The admin server (Bull Board, /metrics, /healthz); undefined when not started. */
  readonly admin: AdminServer | undefined;
  /**
   * Stops every component (each finishes what it holds), then closes the store. Resolves to
   * `true` when every component stopped gracefully within `H2H_WORKER_SHUTDOWN_TIMEOUT_MS`,
   * `false` when one had to be abandoned (see {@link EventWorker.close}). Safe to call twice.
   */
  close(): Promise<boolean>;
}

export interface StartWorkerProcessOptions {
  logger?: Logger;
  /** BullMQ key prefix. Default: the queue contract's (`bull`). */
  queuePrefix?: string;
  /**
   * Whether to serve the admin view (src/admin/admin-server.ts) on ADMIN_HOST:ADMIN_PORT, unless
   * ADMIN_PORT=0. Default: `false`, so that tests and embedders never bind the admin port;
   * `h2h-sync worker` ({@link runWorker}) passes `true`.
   */
  admin?: boolean;
}

/** One upstream's part of the worker process: its client and budget, its reconciler and its submission pump. */
interface UpstreamEngine {
  readonly upstream: Upstream;
  readonly reconciler: RunningReconciler;
  readonly pump: SubmissionPump;
  /** Stops the pump, then the reconciler, then closes the client. */
  stop(timeoutMs: number): Promise<boolean>;
}

/**
 * Starts the engine of one upstream account (docs/upstreams.md) on `store`, claimed for that
 * upstream's orders only (`withClaims(…, account.name)`): its client and rate budget
 * (`createUpstream`), its reconciler (its own queue, scheduler and pass lock; its metrics in
 * `registry` under its `upstream` label) and its submission pump, which waits on its circuit.
 * Early polls are taken by the process's one poll-request worker. Throws a ConfigError naming
 * the account's URL or key variable when they are missing.
 */
async function startUpstreamEngine(
  config: Config,
  opened: OrderStore,
  account: UpstreamAccount,
  registry: Registry,
  options: StartWorkerProcessOptions,
): Promise<UpstreamEngine> {
  const settings = reconcilerSettings(config);
  const store = withClaims(opened, settings, account.name);
  const logger = options.logger?.child({ upstream: account.name });
  const upstream = await createUpstream(config, account, { ...(logger ? { logger } : {}) });
  try {
    const reconciler = await startReconciler({
      settings,
      store,
      client: upstream.client,
      budget: upstream.budget,
      redisUrl: config.redisUrl,
      registry,
      takePollRequests: false,
      ...(options.queuePrefix === undefined ? {} : { queuePrefix: options.queuePrefix }),
      ...(logger ? { logger } : {}),
    });
    // The shop API's queued orders of this upstream go out from here: its client, budget and circuit.
    const pump = startSubmissionPump({
      store,
      client: upstream.client,
      maxAgeMs: apiSettings(config).submissionMaxAgeMs,
      ...(logger ? { logger } : {}),
    });
    return {
      upstream,
      reconciler,
      pump,
      stop: async (timeoutMs) => {
        await pump.stop();
        const graceful = await reconciler.close({ timeoutMs });
        await upstream.close();
        return graceful;
      },
    };
  } catch (error) {
    await upstream.close();
    throw error;
  }
}

/**
 * Starts, for each upstream account of the configuration, its client, reconciler and submission
 * pump ({@link startUpstreamEngine}), one poll-request worker that hands each early poll to its
 * upstream's reconciler, and each upstream's catalog refresh (docs/operations.md, "Catalog refresh"). Stops
 * them in reverse order (the upstreams' engines together, last). Throws a ConfigError naming an
 * account's URL or key when missing.
 */
async function startProcessReconciler(
  config: Config,
  store: OrderStore,
  options: StartWorkerProcessOptions,
): Promise<{ metrics: ReconcilerMetrics; reconcilers: RunningReconciler[]; stop: () => Promise<boolean> }> {
  const timeoutMs = workerSettings(config).shutdownTimeoutMs;
  /** Stops of what started, run last-started first; each resolves to "stopped gracefully". */
  const stops: Array<() => Promise<boolean>> = [];
  const stopAll = async () => {
    let graceful = true;
    for (const stop of stops.reverse()) graceful = (await stop().catch(() => false)) && graceful;
    return graceful;
  };
  try {
    // Orders that waited too long while no worker ran (API_SUBMISSION_MAX_AGE_S) are cancelled
    // before a reconciler's first pass could send a blocked one; the pumps sweep from then on.
    const { submissionMaxAgeMs } = apiSettings(config);
    if (submissionMaxAgeMs > 0) await store.writer.expireWaitingOrders(Date.now() - submissionMaxAgeMs);
    // One registry for the process: each reconciler's series under its `upstream` label.
    const registry = new Registry();
    const engines = new Map<string, UpstreamEngine>();
    // Side by side, not one after another: the worker's stop has one shutdown timeout, however
    // many upstreams there are.
    stops.push(async () => {
      const stopped = await Promise.all(
        [...engines.values()].map((engine) => engine.stop(timeoutMs).catch(() => false)),
      );
      return stopped.every(Boolean);
    });
    for (const account of config.upstreams) {
      engines.set(account.name, await startUpstreamEngine(config, store, account, registry, options));
    }
    const reconcilers = [...engines.values()].map((engine) => engine.reconciler);
    // Beside the reconcilers' series: each upstream's shared budget and submission queue.
    registerBudgetGauges(
      registry,
      [...engines].map(([upstream, engine]) => ({ upstream, budget: engine.upstream.budget })),
    );
    registerSubmissionGauges(registry, store.queries, [...engines.keys()]);
    const pollRequests = await startPollRequestWorker({
      pollers: reconcilers,
      redisUrl: config.redisUrl,
      ...(options.queuePrefix === undefined ? {} : { queuePrefix: options.queuePrefix }),
      ...(options.logger ? { logger: options.logger } : {}),
    });
    stops.push(() => pollRequests.close({ timeoutMs }));
    // Each upstream's local catalog and balance, from its own client and budget (poll share only),
    // on its own queue and scheduler (catalogRefreshNames); the balance gauges in the same registry.
    registerBalanceMetrics(registry, store.balance);
    for (const [name, engine] of engines) {
      const catalog = await startCatalogRefresh({
        store,
        upstream: name,
        client: engine.upstream.client,
        everyMs: catalogSettings(config).refreshEveryMs,
        redisUrl: config.redisUrl,
        ...(options.queuePrefix === undefined ? {} : { queuePrefix: options.queuePrefix }),
        ...(options.logger ? { logger: options.logger } : {}),
      });
      stops.push(() => catalog.close({ timeoutMs }));
    }
    const main = engines.get(DEFAULT_UPSTREAM)!;
    return { metrics: main.reconciler.metrics, reconcilers, stop: stopAll };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/**
 * Starts the admin server on the process's queues and metrics. A port already in use is logged
 * and the worker runs on without it (the admin view must never stop webhooks from being
 * applied, e.g. a second worker on the same host); any other failure is thrown.
 */
async function startProcessAdmin(
  config: Config,
  settings: ReturnType<typeof adminSettings>,
  eventWorker: EventWorker,
  metrics: { reconciler: ReconcilerMetrics | undefined; notify: NotifyMetrics; store: Registry },
  options: StartWorkerProcessOptions,
): Promise<AdminServer | undefined> {
  try {
    const server = await startAdminServer({
      settings,
      redisUrl: config.redisUrl,
      ...(options.queuePrefix === undefined ? {} : { queuePrefix: options.queuePrefix }),
      // Every upstream's reconcile queue after the default's (reconcileNames).
      queueNames: [
        ...ADMIN_QUEUES,
        ...config.upstreams
          .filter((u) => !isDefaultUpstream(u.name))
          .map((u) => reconcileNames(u.name).queue),
      ],
      registries: [
        metrics.store,
        metrics.notify.registry,
        ...(metrics.reconciler ? [metrics.reconciler.registry] : []),
      ],
      workerStats: () => eventWorker.stats(),
      ...(options.logger ? { logger: options.logger } : {}),
    });
    options.logger?.info({ url: server.url }, 'admin server listening (Bull Board at /admin/queues)');
    return server;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    options.logger?.error(
      { host: settings.host, port: settings.port },
      'admin server not started: the port is in use (set ADMIN_PORT to another port, or 0 for none)',
    );
    return undefined;
  }
}

/**
 * Composes the worker process: opens the order store (one SQLite connection for the process),
 * starts the event worker on it and waits until it takes jobs, then the reconciler (unless
 * `RECONCILE_ENABLED=false`) on the same store, then the admin server when `options.admin`
 * is set. Everything that runs in the
 * worker process starts here and stops in `close()`, in reverse order, before the store closes.
 * Throws a ConfigError or a StoreError before anything runs when the settings or the database
 * file are unusable.
 */
export async function startWorkerProcess(
  config: Config,
  options: StartWorkerProcessOptions = {},
): Promise<RunningWorkerProcess> {
  const settings = workerSettings(config);
  const { logger } = options;
  // loadConfig already refused a non-loopback admin host without credentials.
  const admin = options.admin ? adminSettings(config) : undefined;
  // Every write of this process waits for another process's lock on timers (the store's write
  // queue), so a store held elsewhere never blocks the event loop and the event worker keeps
  // renewing its job locks; the event worker's batches wait up to storeLockWaitMs, the other
  // writes (the reconciler's, the notifier's) up to H2H_DB_LOCK_TIMEOUT_MS.
  // With the claims on orders: the reconciler, the submission pump and early polls claim orders
  // and record polls with them (order-claims.ts).
  const opened = await openStore(settings.dbUrl, {
    role: 'worker',
    lockTimeoutMs: settings.dbLockTimeoutMs,
    poolMax: settings.dbPoolMax,
    balanceLowThreshold: catalogSettings(config).balanceLowThreshold,
    balanceDriftThreshold: catalogSettings(config).balanceDriftThreshold,
    failover: failoverSettings(config),
    productLinks: catalogSettings(config).productLinks,
  });
  let store: ClaimingStore<typeof opened>;
  try {
    store = withClaims(opened, reconcilerSettings(config));
  } catch (error) {
    // Settings the claims refuse: the pool (PostgreSQL) would keep the process alive.
    await opened.close();
    throw error;
  }
  /** Stops of the started components, run last-started first. Each resolves to "stopped gracefully". */
  const stops: Array<() => Promise<boolean>> = [];
  const stopAll = async (): Promise<boolean> => {
    let graceful = true;
    for (const stop of stops.reverse()) {
      graceful = (await stop().catch(() => false)) && graceful;
    }
    await store.close();
    return graceful;
  };

  let eventWorker: EventWorker;
  let notifier: Notifier;
  let reconcilerMetrics: ReconcilerMetrics | undefined;
  let reconcilers: RunningReconciler[] = [];
  let adminServer: AdminServer | undefined;
  try {
    eventWorker = createEventWorker({
      writer: store.writer,
      redisUrl: settings.redisUrl,
      ...(options.queuePrefix === undefined ? {} : { prefix: options.queuePrefix }),
      concurrency: settings.concurrency,
      maxBatchSize: settings.batchSize,
      lockDurationMs: settings.lockDurationMs,
      stalledIntervalMs: settings.stalledIntervalMs,
      maxStalledCount: settings.maxStalledCount,
      storeLockWaitMs: settings.storeLockWaitMs,
      ...(logger ? { logger } : {}),
    });
    stops.push(() => eventWorker.close({ timeoutMs: settings.shutdownTimeoutMs }));
    await eventWorker.waitUntilReady();
    stops.push(
      startRetention(
        store,
        { feedRetentionMs: settings.feedRetentionMs, historyRetentionMs: settings.historyRetentionMs },
        logger,
      ),
    );

    const notify = notifySettings(config);
    // Upgrading from the notification queue before the outbox: what it still held moves in first.
    await moveOldNotificationQueue({
      store,
      redisUrl: settings.redisUrl,
      ...(options.queuePrefix === undefined ? {} : { prefix: options.queuePrefix }),
      ...(logger ? { logger } : {}),
    });
    const started = await startNotifier({
      store,
      timeoutMs: notify.timeoutMs,
      retryScheduleMs: notify.retryScheduleMs,
      concurrency: notify.concurrency,
      dispatchEveryMs: notify.dispatchEveryMs,
      ...(logger ? { logger } : {}),
    });
    notifier = started;
    stops.push(() => started.close({ timeoutMs: settings.shutdownTimeoutMs }));

    if (config.settings.RECONCILE_ENABLED) {
      // Same process, same store (one SQLite connection); registered after the event worker so
      // that it stops first.
      const reconciler = await startProcessReconciler(config, store, options);
      stops.push(reconciler.stop);
      reconcilerMetrics = reconciler.metrics;
      reconcilers = reconciler.reconcilers;
    }

    if (admin && admin.port !== 0) {
      adminServer = await startProcessAdmin(
        config,
        admin,
        eventWorker,
        {
          reconciler: reconcilerMetrics,
          notify: notifier.metrics,
          store: storeHealthMetrics(store.context.db),
        },
        options,
      );
      const started = adminServer;
      if (started) {
        stops.push(async () => {
          await started.close();
          return true;
        });
      }
    }
  } catch (error) {
    await stopAll();
    throw error;
  }

  let closing: Promise<boolean> | undefined;
  return {
    settings,
    store,
    eventWorker,
    notifier,
    reconcilerMetrics,
    reconcilers,
    admin: adminServer,
    close: () => {
      closing ??= stopAll();
      return closing;
    },
  };
}

/**
 * The `h2h-sync worker` process: loads the configuration, starts {@link startWorkerProcess},
 * tells pm2 it is ready (`process.send('ready')`, for `wait_ready`), and on SIGINT or SIGTERM
 * stops taking jobs, finishes and commits the active ones, closes, and exits 0 — or exits 1 when
 * a component had to be abandoned or the stop outlasts `H2H_WORKER_SHUTDOWN_TIMEOUT_MS` plus
 * {@link STORE_CLOSE_MARGIN_MS} ({@link exitGracefully}).
 */
export async function runWorker(config: Config = loadConfig()): Promise<RunningWorkerProcess> {
  const settings = workerSettings(config);
  const logger = createLogger({ name: 'worker', level: settings.logLevel, format: settings.logFormat });
  // First, so that `pm2 logs` always says which Redis and store this process uses.
  logger.info(
    { redis: redactRedisUrl(config.redisUrl), store: redactUrl(settings.dbUrl) },
    `worker starting: Redis ${redactRedisUrl(config.redisUrl)}, store ${redactUrl(settings.dbUrl)}`,
  );
  const running = await startWorkerProcess(config, { logger, admin: true });
  // Before the line that says it is ready: a signal sent on it (pm2 reload, a test) is then
  // always handled, never the default action that kills the process without draining.
  exitGracefully({
    name: 'worker',
    logger,
    timeoutMs: settings.shutdownTimeoutMs + STORE_CLOSE_MARGIN_MS,
    close: async () => {
      const graceful = await running.close();
      logger.info({ graceful, ...running.eventWorker.stats() }, 'worker stopped');
      return graceful;
    },
  });
  logger.info(
    { concurrency: settings.concurrency, batchSize: settings.batchSize, store: redactUrl(settings.dbUrl) },
    'worker taking webhook jobs',
  );
  process.send?.('ready');

  return running;
}
