import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ConfigError } from '../config/config.js';

/** How long {@link connectRedis} waits for Redis to answer. */
export const REDIS_CONNECT_TIMEOUT_MS = 3_000;

/** Options of {@link connectRedis}. */
export interface ConnectRedisOptions {
  /**
   * What lives in Redis, for the error message. Default: the rate budget (`every upstream call
   * draws from the rate budget kept there`).
   */
  what?: string;
  /**
   * Whether the connection reconnects after Redis goes away: `true` for a connection a
   * long-running process keeps; `false` (default) for a CLI command, which should fail rather
   * than wait.
   */
  reconnect?: boolean;
  /** Name the connection shows in `CLIENT LIST`. Default: none. */
  connectionName?: string;
  /** Gets a warning for every connection error after the first connect. Default: none (errors are dropped). */
  logger?: Logger;
}

/**
 * Connects to Redis at `url` and waits until it answers, or throws a {@link ConfigError} naming
 * REDIS_URL, what lives there and the fix when it does not within
 * {@link REDIS_CONNECT_TIMEOUT_MS}. A command fails after one retry instead of waiting.
 */
export async function connectRedis(url: string, options: ConnectRedisOptions = {}): Promise<Redis> {
  const what = options.what ?? 'every upstream call draws from the rate budget kept there';
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: 1,
    ...(options.reconnect ? {} : { retryStrategy: () => null }),
    ...(options.connectionName ? { connectionName: options.connectionName } : {}),
  });
  // Without a listener an 'error' event would crash the process.
  redis.on('error', () => {});
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    throw new ConfigError(
      `cannot reach Redis at REDIS_URL=${url} (${(err as Error).message}); ${what}: start Redis or set REDIS_URL`,
    );
  }
  const { logger } = options;
  if (logger) {
    redis.on('error', (error) =>
      logger.warn({ err: error, connection: options.connectionName }, 'Redis connection error'),
    );
  }
  return redis;
}

/** `url` with its password (and user name) replaced, for logs and messages. */
export function redactRedisUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparseable REDIS_URL)';
  }
}

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
    /Connection is closed|connect ETIMEDOUT/.test(error.message)
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
