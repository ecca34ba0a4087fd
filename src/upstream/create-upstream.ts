import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { budgetSettings, type Config, upstreamSettings } from '../config/config.js';
import { RateBudget } from '../rate-budget/rate-budget.js';
import { connectRedis } from '../shared/redis-connection.js';
import { UpstreamClient } from './client.js';

/** The upstream as every process calls it: the client, the shared rate budget it draws from, and the budget's Redis. */
export interface Upstream {
  readonly client: UpstreamClient;
  /** The shared rate budget the client draws from; the reconciler reads its use. */
  readonly budget: RateBudget;
  /** The budget's Redis connection (also fit for the reconciler's pass lock). */
  readonly redis: Redis;
  /** Closes the client's connections, then Redis. Safe to call twice. */
  close(): Promise<void>;
}

/** Options of {@link createUpstream}. */
export interface CreateUpstreamOptions {
  /** Gets the client's line per attempt (debug) and the Redis connection errors (warn). Default: none. */
  logger?: Logger;
}

/**
 * Opens the upstream of `config`: an {@link UpstreamClient} with the configured URL, key,
 * timeouts and retries, drawing from the shared rate budget on a Redis connection of its own
 * (`h2h-budget`, reconnecting after a Redis restart). Throws a ConfigError naming
 * H2H_BASE_URL / H2H_API_KEY when they are missing, or REDIS_URL when Redis does not answer.
 */
export async function createUpstream(config: Config, options: CreateUpstreamOptions = {}): Promise<Upstream> {
  const settings = upstreamSettings(config);
  const { logger } = options;
  const redis = await connectRedis(config.redisUrl, {
    reconnect: true,
    connectionName: 'h2h-budget',
    logger,
  });
  const budget = new RateBudget({ redis, apiKey: settings.apiKey, ...budgetSettings(config) });
  let client: UpstreamClient;
  try {
    client = new UpstreamClient({
      ...settings,
      retry: { maxAttempts: settings.retryMaxAttempts },
      budget,
      logger,
    });
  } catch (error) {
    redis.disconnect();
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    client,
    budget,
    redis,
    close() {
      closing ??= client.close().finally(() => redis.disconnect());
      return closing;
    },
  };
}
