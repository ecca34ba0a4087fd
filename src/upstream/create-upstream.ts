import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { accountSettings, budgetSettings, type Config } from '../config/config.js';
import { ConfigError } from '../config/config-error.js';
import { RateBudget } from '../rate-budget/rate-budget.js';
import { connectRedis } from '../shared/redis-connection.js';
import { UpstreamClient } from './client.js';
import { DEFAULT_UPSTREAM } from './model.js';
import type { UpstreamAccount } from './upstreams.js';

/** One upstream account as every process calls it: the client, the shared rate budget it draws from, and the budget's Redis. */
export interface Upstream {
  /** The account's name (`default` for today's single upstream; docs/upstreams.md). */
  readonly name: string;
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
 * The account named `name` of `config.upstreams`; throws a ConfigError naming the known ones
 * when there is none.
 */
export function upstreamAccount(
  config: Pick<Config, 'upstreams'>,
  name: string = DEFAULT_UPSTREAM,
): UpstreamAccount {
  const account = config.upstreams.find((candidate) => candidate.name === name);
  if (!account) {
    throw new ConfigError(
      `no upstream is named "${name}": the configured ones are ${config.upstreams.map((u) => u.name).join(', ')} (H2H_UPSTREAMS_FILE; docs/upstreams.md)`,
    );
  }
  return account;
}

/**
 * Opens one upstream account of `config` (default: the `default` one, today's single upstream):
 * an {@link UpstreamClient} with the account's URL and key and the configured timeouts and
 * retries, drawing from the account's own rate budget (keyed by a hash of its API key, with its
 * `rate_limit`) on a Redis connection of its own (`h2h-budget`, reconnecting after a Redis
 * restart). Throws a ConfigError naming H2H_BASE_URL / H2H_API_KEY (another account's key
 * variable) when they are missing, or REDIS_URL when Redis does not answer.
 */
export async function createUpstream(
  config: Config,
  account: UpstreamAccount = upstreamAccount(config),
  options: CreateUpstreamOptions = {},
): Promise<Upstream> {
  const settings = accountSettings(config, account);
  const { logger } = options;
  const redis = await connectRedis(config.redisUrl, {
    reconnect: true,
    connectionName: 'h2h-budget',
    logger,
  });
  let budget: RateBudget;
  let client: UpstreamClient;
  try {
    budget = new RateBudget({ redis, apiKey: settings.apiKey, ...budgetSettings(config, account.rateLimit) });
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
    name: account.name,
    client,
    budget,
    redis,
    close() {
      closing ??= client.close().finally(() => redis.disconnect());
      return closing;
    },
  };
}
