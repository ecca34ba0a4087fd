import { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import {
  type ApiSettings,
  apiSettings,
  budgetSettings,
  type Config,
  catalogSettings,
  failoverSettings,
  loadConfig,
  routingSettings,
} from '../config/config.js';
import { createLogger } from '../observability/logger.js';
import {
  POLL_REQUEST_JOB_NAME,
  POLL_REQUEST_JOB_OPTIONS,
  POLL_REQUEST_QUEUE,
  type PollRequestData,
  pollRequestJobId,
} from '../queue/poll-request-queue.js';
import { DEFAULT_QUEUE_PREFIX } from '../queue/webhook-queue.js';
import { createRouter } from '../routing/router.js';
import { exitGracefully } from '../shared/graceful-shutdown.js';
import { listeningOrigin } from '../shared/listening-origin.js';
import { watchedRedis } from '../shared/redis-outage.js';
import { type OpenedStore, openStore } from '../store/open-store.js';
import { redactUrl } from '../store/store-url.js';
import { buildApiApp } from './app.js';

/**
 * The `h2h-sync api` process: the settings, the store and Redis connections the app (app.ts)
 * runs on, listening, and the graceful stop on a signal.
 */

/** Longest wait for one Redis command of the API process (a count, an early-poll request). */
const REDIS_COMMAND_TIMEOUT_MS = 1_000;

export interface RunningApi {
  app: FastifyInstance;
  store: OpenedStore;
  /** e.g. `http://127.0.0.1:3002`. */
  origin: string;
  close(): Promise<void>;
}

/**
 * Starts the shop API on its own store connection. It queues the shop's orders for the worker's
 * submission pump and asks the worker for early polls: it sends nothing upstream itself.
 */
export async function startApi(
  config: Config,
  options: { logger?: Logger; settings?: ApiSettings } = {},
): Promise<RunningApi> {
  const settings = options.settings ?? apiSettings(config);
  const store = await openStore(settings.dbUrl, {
    role: 'api',
    lockTimeoutMs: settings.dbLockTimeoutMs,
    poolMax: settings.dbPoolMax,
    balanceLowThreshold: catalogSettings(config).balanceLowThreshold,
    balanceDriftThreshold: catalogSettings(config).balanceDriftThreshold,
    failover: failoverSettings(config),
    productLinks: catalogSettings(config).productLinks,
  });
  // Only early polls and the rate limit's counts need Redis: the API serves the store without it,
  // and a refresh asked while Redis is away fails at once (503) instead of waiting in ioredis'
  // offline queue. A frozen Redis accepts connections and never answers: every request's count
  // waits on it, so each command has a bound (then the request is served uncounted).
  const { connection: redis, outage } = watchedRedis({
    url: config.redisUrl,
    component: 'api',
    logger: options.logger,
    redis: {
      maxRetriesPerRequest: null,
      enableOfflineQueue: false,
      commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    },
  });
  const pollQueue = new Queue<PollRequestData>(POLL_REQUEST_QUEUE, {
    connection: redis,
    prefix: DEFAULT_QUEUE_PREFIX,
    defaultJobOptions: POLL_REQUEST_JOB_OPTIONS,
  });
  pollQueue.on('error', outage.error);
  const closeRedis = async () => {
    await pollQueue.close().catch(() => {});
    redis.disconnect();
  };
  // With several upstreams, each order is routed to one of them (docs/upstreams.md, "Routing").
  const routing = routingSettings(config);
  const router = createRouter(store, config.upstreams, {
    policy: routing.policy,
    maxQueueWaitMs: routing.maxQueueWaitMs,
    rateWindowMs: budgetSettings(config).windowMs,
  });
  let app: FastifyInstance;
  try {
    app = await buildApiApp({
      store,
      submissionBacklog: settings.submissionBacklog,
      retryAfterS: settings.retryAfterS,
      rateLimit: { perMinute: settings.rateLimitPerMin, redis },
      trustProxy: settings.trustProxy,
      ...(router ? { router } : {}),
      requestPoll: async (partnerRef) => {
        const request: PollRequestData = { partnerRef, reason: 'shop_request' };
        await pollQueue.add(POLL_REQUEST_JOB_NAME, request, { jobId: pollRequestJobId(request) });
      },
      ...(options.logger ? { logger: options.logger } : {}),
    });
    await app.listen({ host: settings.host, port: settings.port });
  } catch (error) {
    await closeRedis();
    await store.close();
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    app,
    store,
    origin: listeningOrigin(app.server),
    close: () => {
      closing ??= app
        .close()
        .then(closeRedis)
        .finally(() => store.close());
      return closing;
    },
  };
}

/**
 * The `h2h-sync api` process: starts the API, tells pm2 it is ready, and on SIGINT or SIGTERM
 * stops taking requests, answers those in flight and closes the store ({@link exitGracefully}).
 */
export async function runApi(config: Config = loadConfig()): Promise<RunningApi> {
  const settings = apiSettings(config);
  const logger = createLogger({ name: 'api', level: settings.logLevel, format: settings.logFormat });
  const where = redactUrl(settings.dbUrl);
  logger.info({ store: where }, `api starting: store ${where}`);
  const api = await startApi(config, { logger, settings });
  // Before the line that says it is ready: a signal sent on it (pm2 reload, a test) is then
  // always handled, never the default action that kills the process without draining.
  exitGracefully({
    name: 'api',
    logger,
    timeoutMs: settings.shutdownTimeoutMs,
    close: async () => {
      await api.close();
      logger.info('api stopped');
      return true;
    },
  });
  logger.info({ origin: api.origin, openapi: `${api.origin}/openapi.json` }, 'api listening');
  process.send?.('ready');

  return api;
}
