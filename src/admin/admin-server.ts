import { createHash, timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import { Queue } from 'bullmq';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import type { Logger } from 'pino';
import { Counter, collectDefaultMetrics, Registry } from 'prom-client';
import type { AdminSettings } from '../config/config.js';
import { POLL_REQUEST_QUEUE } from '../queue/poll-request-queue.js';
import { queueJobCounts, registerQueueDepthGauge } from '../queue/queue-depth.js';
import { DEFAULT_QUEUE_PREFIX, WEBHOOK_QUEUE } from '../queue/webhook-queue.js';
import { RECONCILE_QUEUE } from '../reconciler/reconcile-queue.js';
import { CLIENT_ERROR_STATUS, jsonClientErrorHandler } from '../shared/client-error.js';
import { withDeadline } from '../shared/deadline.js';
import type { GroupCommitStats } from '../shared/group-commit.js';
import { listeningOrigin } from '../shared/listening-origin.js';
import { watchedRedis } from '../shared/redis-outage.js';

/** Where Bull Board is served; its base path and the Fastify prefix must be the same. */
export const BULL_BOARD_PATH = '/admin/queues';

/** The queues the admin view shows, in this order. */
export const ADMIN_QUEUES = [WEBHOOK_QUEUE, RECONCILE_QUEUE, POLL_REQUEST_QUEUE] as const;

/** How long `/healthz` and a depth scrape wait for Redis before reporting it down. */
const REDIS_PROBE_TIMEOUT_MS = 1_000;

export interface AdminServerOptions {
  /** Host, port and basic-auth credentials (see `adminSettings`). Port `0` = a free one. */
  settings: AdminSettings;
  /** Redis of the queues. */
  redisUrl: string;
  /** BullMQ key prefix. Default: the queue contract's (`bull`). */
  queuePrefix?: string;
  /**
   * The queues the view shows and `h2h_queue_jobs` counts, in this order. Default:
   * {@link ADMIN_QUEUES}; the worker adds each upstream's reconcile queue.
   */
  queueNames?: readonly string[];
  /** Registries whose metrics `/metrics` also serves, e.g. the reconciler's. */
  registries?: Registry[];
  /** Group-commit figures of the process's event worker, exposed as `h2h_worker_*` counters. */
  workerStats?: () => GroupCommitStats;
  logger?: Logger;
}

/** A running admin server. */
export interface AdminServer {
  /** `http://host:port` it listens on. */
  readonly url: string;
  readonly port: number;
  /** Stops listening and closes its Redis connection. Safe to call twice. */
  close(): Promise<void>;
}

/** Waits for a Redis answer at most {@link REDIS_PROBE_TIMEOUT_MS}, so a frozen Redis cannot hang a probe. */
function redisAnswerWithin<T>(work: Promise<T>, what: string): Promise<T> {
  return withDeadline(
    work,
    REDIS_PROBE_TIMEOUT_MS,
    () => new Error(`${what}: no answer from Redis within ${REDIS_PROBE_TIMEOUT_MS} ms`),
  );
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/** A constant-time check of an `Authorization: Basic …` header against the credentials. */
function basicAuthMatches(header: string | undefined, auth: { user: string; password: string }): boolean {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!match?.[1]) return false;
  const given = Buffer.from(match[1], 'base64').toString('utf8');
  // Hashing first gives equal lengths, so the comparison leaks neither length nor content.
  return timingSafeEqual(digest(given), digest(`${auth.user}:${auth.password}`));
}

function createAdminRegistry(queues: Queue[], workerStats: AdminServerOptions['workerStats']) {
  const registry = new Registry();
  const registers = [registry];
  collectDefaultMetrics({ register: registry });
  registerQueueDepthGauge(registry, () => redisAnswerWithin(queueJobCounts(queues), 'queue depth'));
  if (workerStats) {
    const fromStats = (name: string, help: string, pick: (stats: GroupCommitStats) => number) =>
      new Counter({
        name,
        help,
        registers,
        collect() {
          this.reset();
          this.inc(pick(workerStats()));
        },
      });
    fromStats('h2h_worker_commits_total', 'Group commits of the event worker.', (s) => s.commits);
    fromStats(
      'h2h_worker_events_committed_total',
      'Webhook events committed to the store.',
      (s) => s.committed,
    );
    fromStats('h2h_worker_events_failed_total', 'Webhook events whose apply failed.', (s) => s.failed);
    fromStats(
      'h2h_worker_busy_seconds_total',
      'Time spent running and committing batches.',
      (s) => s.busyMs / 1000,
    );
  }
  return registry;
}

/**
 * Starts the admin server of the worker process: Bull Board for the webhook, reconcile and
 * poll-request queues under {@link BULL_BOARD_PATH}, `GET /metrics` (process, worker,
 * reconciler and queue-depth metrics) and `GET /healthz` (200 when Redis answers, else 503).
 * With credentials in `settings.auth`, every route needs them (basic auth, else 401).
 * Rejects when the address cannot be bound.
 */
export async function startAdminServer(options: AdminServerOptions): Promise<AdminServer> {
  const { settings, logger } = options;
  const prefix = options.queuePrefix ?? DEFAULT_QUEUE_PREFIX;
  const { connection, outage } = watchedRedis({
    url: options.redisUrl,
    component: 'admin',
    logger,
    redis: { maxRetriesPerRequest: 1, connectionName: 'h2h-admin' },
  });
  const queues = (options.queueNames ?? ADMIN_QUEUES).map((name) => new Queue(name, { connection, prefix }));
  for (const queue of queues) queue.on('error', outage.error);
  const adminRegistry = createAdminRegistry(queues, options.workerStats);
  const registries = [adminRegistry, ...(options.registries ?? [])];

  const loggerInstance: FastifyBaseLogger | undefined = logger?.child({ component: 'admin' });
  const app = Fastify({
    ...(loggerInstance ? { loggerInstance } : { logger: false }),
    logController: new LogController({ disableRequestLogging: true }),
    // Fastify's own handler logs the refused request's raw bytes (basic auth included) at trace.
    clientErrorHandler: jsonClientErrorHandler(
      (kind) => ({
        status: CLIENT_ERROR_STATUS[kind],
        body: {
          error: kind.toUpperCase(),
          message: `request refused before routing (${kind.replaceAll('_', ' ')})`,
        },
      }),
      logger,
    ),
  });
  const { auth } = settings;
  if (auth) {
    app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      if (basicAuthMatches(request.headers.authorization, auth)) return;
      return reply
        .code(401)
        .header('www-authenticate', 'Basic realm="h2h-sync admin", charset="UTF-8"')
        .send({ error: 'UNAUTHORIZED', message: 'admin credentials required (ADMIN_USER / ADMIN_PASSWORD)' });
    });
  }

  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(BULL_BOARD_PATH);
  createBullBoard({
    queues: queues.map((queue) => new BullMQAdapter(queue)),
    // @bull-board/fastify 9.10.1 declares its adapter against its own copy of @bull-board/api
    // (9.10.1, beside our 9.10.2): the same interface, nominally different private members.
    serverAdapter: serverAdapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
    options: { uiConfig: { boardTitle: 'h2h-sync' } },
  });
  await app.register(serverAdapter.registerPlugin(), { prefix: BULL_BOARD_PATH });

  app.get('/metrics', async (_request, reply) => {
    const texts = await Promise.all(registries.map((registry) => registry.metrics()));
    return reply.type(adminRegistry.contentType).send(texts.join('\n'));
  });
  app.get('/healthz', async (_request, reply) => {
    try {
      await redisAnswerWithin(connection.ping(), 'healthz');
      return { status: 'ok', redis: 'ok' };
    } catch (error) {
      return reply.code(503).send({ status: 'degraded', redis: (error as Error).message });
    }
  });

  const closeConnections = async () => {
    await Promise.all(queues.map((queue) => queue.close().catch(() => {})));
    connection.disconnect();
  };
  try {
    await app.listen({ host: settings.host, port: settings.port });
  } catch (error) {
    await app.close().catch(() => {});
    await closeConnections();
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    url: listeningOrigin(app.server),
    port: (app.server.address() as AddressInfo).port,
    close: () => {
      closing ??= app.close().then(closeConnections);
      return closing;
    },
  };
}
