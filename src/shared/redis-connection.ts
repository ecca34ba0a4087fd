import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ConfigError } from '../config/config.js';
import { parseRedisAddress, redactRedisAddress } from './redis-address.js';
import { createRedis } from './redis-client.js';

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
 * Connects to Redis at `url` (a Redis address: redis-address.ts) and waits until it answers, or throws a {@link ConfigError} naming
 * REDIS_URL, what lives there and the fix when it does not within
 * {@link REDIS_CONNECT_TIMEOUT_MS}. A command fails after one retry instead of waiting.
 */
export async function connectRedis(url: string, options: ConnectRedisOptions = {}): Promise<Redis> {
  const what = options.what ?? 'every upstream call draws from the rate budget kept there';
  const redis = createRedis(url, {
    lazyConnect: true,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: 1,
    reconnect: options.reconnect ?? false,
    ...(options.connectionName ? { connectionName: options.connectionName } : {}),
  });
  // Without a listener an 'error' event would crash the process.
  redis.on('error', () => {});
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    const sentinel = parseRedisAddress(url).kind === 'sentinel';
    const where = sentinel
      ? `${redactRedisAddress(url)} (through the sentinels)`
      : `REDIS_URL=${redactRedisAddress(url)}`;
    const fix = sentinel
      ? 'check H2H_REDIS_SENTINELS and H2H_REDIS_SENTINEL_MASTER'
      : 'start Redis or set REDIS_URL';
    throw new ConfigError(`cannot reach Redis at ${where} (${(err as Error).message}); ${what}: ${fix}`);
  }
  const { logger } = options;
  if (logger) {
    redis.on('error', (error) =>
      logger.warn({ err: error, connection: options.connectionName }, 'Redis connection error'),
    );
  }
  return redis;
}
