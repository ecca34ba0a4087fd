import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import {
  type Config,
  ConfigError,
  loadConfig,
  reconcilerSettings,
  upstreamSettings,
} from '../config/config.js';
import { createLogger } from '../observability/logger.js';
import { RateBudget } from '../rate-budget/rate-budget.js';
import { openDatabase } from '../store/database.js';
import { type OrderStore, openOrderStore } from '../store/order-store.js';
import { UpstreamClient } from '../upstream/client.js';

/** What a CLI command works with; open only the parts it needs and `close()` them at the end. */
export interface CliContext {
  config: Config;
  logger: Logger;
  client?: UpstreamClient;
  /** The shared rate budget the client draws from, and its Redis connection (with `upstream`). */
  budget?: RateBudget;
  redis?: Redis;
  /** Opened with the reconciler's settings (its poll schedule), as in every process that writes orders. */
  store?: OrderStore;
  close(): Promise<void>;
}

export interface OpenContextOptions {
  /** Calls the upstream: needs H2H_BASE_URL, H2H_API_KEY and the shared rate budget in Redis. */
  upstream?: boolean;
  /** Reads or writes the order store (H2H_DB_PATH). */
  store?: boolean;
  /** CLI log level (logs go to stderr; the command prints its own outcome). Default: `error`. */
  logLevel?: string;
}

/**
 * Connects to Redis or fails fast with a ConfigError naming REDIS_URL and `what` lives there
 * (by default the rate budget, which every upstream call draws from).
 */
export async function connectRedis(
  url: string,
  what = 'every upstream call draws from the rate budget kept there',
): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 3000,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return redis;
  } catch (err) {
    redis.disconnect();
    throw new ConfigError(
      `cannot reach Redis at REDIS_URL=${url} (${(err as Error).message}); ${what}: start Redis or set REDIS_URL`,
    );
  }
}

/** Loads the config and opens what the command needs. */
export async function openContext(options: OpenContextOptions): Promise<CliContext> {
  const config = loadConfig();
  const logger = createLogger({
    level: options.logLevel ?? 'error',
    name: 'cli',
    destination: process.stderr,
  });
  const closers: Array<() => Promise<void> | void> = [];
  const context: CliContext = {
    config,
    logger,
    async close() {
      for (const close of closers.reverse()) await close();
    },
  };
  try {
    if (options.store) {
      const db = openDatabase({ path: config.dbPath });
      closers.push(() => void db.close());
      context.store = openOrderStore(db, reconcilerSettings(config));
    }
    if (options.upstream) {
      const upstream = upstreamSettings(config);
      const redis = await connectRedis(config.redisUrl);
      closers.push(() => void redis.disconnect());
      const budget = new RateBudget({ redis, apiKey: upstream.apiKey, ...config.budget });
      context.redis = redis;
      context.budget = budget;
      const client = new UpstreamClient({
        ...upstream,
        retry: { maxAttempts: upstream.retryMaxAttempts },
        budget,
        logger,
      });
      closers.push(() => client.close());
      context.client = client;
    }
    return context;
  } catch (err) {
    await context.close();
    throw err;
  }
}
