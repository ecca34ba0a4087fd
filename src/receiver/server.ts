import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { type Config, loadConfig, type ReceiverSettings, receiverSettings } from '../config/config.js';
import { createLogger } from '../observability/logger.js';
import { createWebhookProducer, type WebhookProducer } from '../queue/webhook-producer.js';
import { exitGracefully } from '../shared/graceful-shutdown.js';
import { listeningOrigin } from '../shared/listening-origin.js';
import { redactRedisUrl } from '../shared/redis-outage.js';
import { buildReceiverApp } from './app.js';
import { createReceiverMetrics, type ReceiverMetrics } from './metrics.js';
import {
  type ReceiverMetricsServer,
  receiverMetricsPort,
  startReceiverMetricsServer,
} from './metrics-server.js';

/** A listening receiver. */
export interface RunningReceiver {
  readonly app: FastifyInstance;
  readonly producer: WebhookProducer;
  /** Where it listens, e.g. `http://127.0.0.1:3000`. */
  readonly origin: string;
  /** `origin` + the webhook path. */
  readonly webhookUrl: string;
  /** Where its metrics are served (a separate listener), or null when turned off. */
  readonly metricsUrl: string | null;
  /** Its metrics, also when not served (the demo reads its counters in-process). */
  readonly metrics: ReceiverMetrics;
  /**
   * Stops accepting connections, lets requests in flight finish (their events are queued as
   * usual), then closes the queues and Redis. Safe to call twice.
   */
  close(): Promise<void>;
}

export interface StartReceiverOptions {
  logger?: Logger;
  /** Where `NODE_APP_INSTANCE` is read (the metrics port offset under pm2). Default: `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** BullMQ key prefix. Default: the producer's (`bull`). */
  queuePrefix?: string;
}

/**
 * Builds the receiver from its settings and listens on `host:port`. Redis need not be up: until
 * it is, webhooks are answered 503 and `/readyz` says so.
 */
export async function startReceiver(
  settings: ReceiverSettings,
  options: StartReceiverOptions = {},
): Promise<RunningReceiver> {
  const producer = createWebhookProducer({
    redisUrl: settings.redisUrl,
    enqueueTimeoutMs: settings.enqueueTimeoutMs,
    replicaAcks: settings.replicaAcks,
    replicaAckTimeoutMs: settings.replicaAckTimeoutMs,
    ...(options.queuePrefix === undefined ? {} : { prefix: options.queuePrefix }),
    ...(options.logger ? { logger: options.logger } : {}),
  });
  try {
    await producer.ping();
  } catch (error) {
    options.logger?.warn({ err: error }, 'Redis is not reachable yet; webhooks are answered 503 until it is');
  }
  const metrics = createReceiverMetrics(producer);
  let app: FastifyInstance | undefined;
  let metricsServer: ReceiverMetricsServer | undefined;
  try {
    app = await buildReceiverApp({
      upstreams: settings.upstreams,
      producer,
      path: settings.path,
      toleranceS: settings.toleranceS,
      bodyLimit: settings.bodyLimit,
      headers: settings.headers,
      limits: {
        requestTimeoutMs: settings.timeouts.requestMs,
        headersTimeoutMs: settings.timeouts.headersMs,
        idleTimeoutMs: settings.timeouts.idleMs,
        keepAliveTimeoutMs: settings.timeouts.keepAliveMs,
        maxConnections: settings.maxConnections,
      },
      metrics,
      ...(options.logger ? { logger: options.logger } : {}),
    });
    await app.listen({ host: settings.host, port: settings.port });
    const metricsPort = receiverMetricsPort(settings.metrics.port, options.env);
    if (metricsPort !== 0) {
      metricsServer = await startReceiverMetricsServer(metrics.registry, settings.metrics.host, metricsPort);
    }
  } catch (error) {
    await app?.close();
    await producer.close();
    throw error;
  }
  const listening = app;
  const origin = listeningOrigin(app.server);
  let closing: Promise<void> | undefined;
  return {
    app: listening,
    producer,
    origin,
    webhookUrl: `${origin}${settings.path}`,
    metricsUrl: metricsServer?.url ?? null,
    metrics,
    close() {
      closing ??= (async () => {
        try {
          await listening.close();
          await metricsServer?.close();
        } finally {
          await producer.close();
        }
      })();
      return closing;
    },
  };
}

/**
 * The `h2h-sync receiver` process: loads the configuration, listens, tells pm2 it is ready
 * (`process.send('ready')`, for `wait_ready`), and on SIGINT or SIGTERM drains and exits 0 — or
 * exits 1 when the drain outlasts `H2H_SHUTDOWN_TIMEOUT_MS` ({@link exitGracefully}). Throws a
 * ConfigError for bad settings before anything starts.
 */
export async function runReceiver(config: Config = loadConfig()): Promise<RunningReceiver> {
  const settings = receiverSettings(config);
  const logger = createLogger({
    name: 'receiver',
    level: settings.logLevel,
    format: settings.logFormat,
    redactHeaders: [settings.headers.signature],
  });
  // First, so that `pm2 logs` always says which Redis this process queues to.
  logger.info(
    { redis: redactRedisUrl(settings.redisUrl) },
    `receiver starting: Redis ${redactRedisUrl(settings.redisUrl)}`,
  );
  const receiver = await startReceiver(settings, { logger });
  // Before the line that says it is ready: a signal sent on it (pm2 reload, a test) is then
  // always handled, never the default action that kills the process without draining.
  exitGracefully({
    name: 'receiver',
    logger,
    timeoutMs: settings.shutdownTimeoutMs,
    close: async () => {
      await receiver.close();
      logger.info('receiver stopped');
      return true;
    },
  });
  logger.info(
    { url: receiver.webhookUrl, origin: receiver.origin, metrics: receiver.metricsUrl },
    'receiver listening',
  );
  process.send?.('ready');

  return receiver;
}
