import type { Redis, RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { redactRedisAddress } from './redis-address.js';
import { createRedis } from './redis-client.js';

/** A Redis address (URL or Sentinel form) with its passwords replaced, for logs and messages. */
export const redactRedisUrl = redactRedisAddress;

/** Errors that only say Redis cannot be reached (yet): waited out, not reported one by one. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
]);

function isUnreachable(error: Error): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return (
    (code !== undefined && UNREACHABLE_CODES.has(code)) ||
    /Connection is closed|connect ETIMEDOUT|All sentinels are unreachable/.test(error.message)
  );
}

/** How often a process still waiting for Redis says so again. */
export const REDIS_WAIT_LOG_INTERVAL_MS = 30_000;

/** What a long-running component hooks to the 'error' and 'ready' events of its Redis users. */
export interface RedisOutageLog {
  /** For every 'error' listener: a connection, a BullMQ Worker, Queue or QueueEvents. */
  error(error: Error): void;
  /** For the connection's 'ready'. */
  ready(): void;
}

/**
 * One outage log for a component: "waiting for Redis at URL" once (warn), again every
 * `intervalMs` with the attempt count, each failed attempt at debug, and "Redis is reachable"
 * when it answers; other errors are logged as errors. Hook it to every connection and every
 * BullMQ object of the component, so that none is left without an 'error' listener (ioredis
 * would print each error raw with console.error).
 */
export function redisOutageLog(options: {
  url: string;
  component: string;
  logger?: Logger;
  intervalMs?: number;
}): RedisOutageLog {
  const { logger, component } = options;
  const redis = redactRedisUrl(options.url);
  const intervalMs = options.intervalMs ?? REDIS_WAIT_LOG_INTERVAL_MS;
  let attempts = 0;
  let lastLogged = 0;
  return {
    error(error) {
      if (!isUnreachable(error)) {
        logger?.error({ err: error, component }, `${component}: Redis error`);
        return;
      }
      attempts += 1;
      const code = (error as NodeJS.ErrnoException).code ?? error.message;
      logger?.debug({ component, redis, attempt: attempts, code }, 'Redis not reachable');
      const now = Date.now();
      if (attempts === 1 || now - lastLogged >= intervalMs) {
        lastLogged = now;
        logger?.warn({ component, redis, attempt: attempts, code }, `waiting for Redis at ${redis}`);
      }
    },
    ready() {
      if (attempts > 0) logger?.info({ component, redis, attempts }, `Redis is reachable at ${redis}`);
      attempts = 0;
      lastLogged = 0;
    },
  };
}

/**
 * A long-running component's Redis connection with its {@link redisOutageLog} hooked to its
 * 'error' and 'ready': hook `outage.error` to the component's BullMQ objects too.
 */
export function watchedRedis(options: {
  url: string;
  component: string;
  logger?: Logger | undefined;
  redis: RedisOptions;
}): { connection: Redis; outage: RedisOutageLog } {
  const outage = redisOutageLog({
    url: options.url,
    component: options.component,
    ...(options.logger ? { logger: options.logger } : {}),
  });
  const connection = createRedis(options.url, options.redis);
  connection.on('error', outage.error);
  connection.on('ready', outage.ready);
  return { connection, outage };
}
