import { Redis, type RedisOptions } from 'ioredis';
import { parseRedisAddress } from './redis-address.js';

/** Options of {@link createRedis}: ioredis's own, and whether the connection comes back. */
export interface CreateRedisOptions extends RedisOptions {
  /**
   * Whether the connection reconnects after Redis (or every sentinel) goes away: `true`
   * (default) for a long-running process, `false` for a CLI command, which should fail rather
   * than wait.
   */
  reconnect?: boolean;
}

/**
 * A write sent to a server that a failover has made a replica is refused with `READONLY`.
 * Reconnecting then finds the new primary (through the sentinels, or the name a managed Redis
 * moves); the refused command fails, and its caller retries it as after any Redis error.
 */
function reconnectOnReadOnly(error: Error): boolean {
  return error.message.startsWith('READONLY');
}

/**
 * Every Redis connection of h2h-sync is made here, from the address the configuration gives
 * (`Config.redisUrl`: a `redis://`/`rediss://` URL, or the Sentinel form of redis-address.ts),
 * so that Sentinel, TLS and failover handling apply to the receiver, the workers, the rate
 * budget, the locks and the CLI alike. `options` are ioredis's (the caller's
 * `maxRetriesPerRequest`, offline queue and timeouts); BullMQ's Workers and QueueEvents duplicate
 * the connection they are given, so theirs inherit all of it.
 *
 * With Sentinel, ioredis asks the sentinels for the primary on every (re)connect and checks its
 * role, so after a failover the connection comes back on the promoted replica. Sentinels are
 * tried in turn; when none answers it starts over after ioredis's `sentinelRetryStrategy` (up to
 * 1 s), or fails at once without `reconnect`.
 */
export function createRedis(address: string, options: CreateRedisOptions = {}): Redis {
  const { reconnect = true, ...redisOptions } = options;
  const common: RedisOptions = {
    reconnectOnError: reconnectOnReadOnly,
    ...(reconnect ? {} : { retryStrategy: () => null }),
    ...redisOptions,
  };
  const target = parseRedisAddress(address);
  if (target.kind === 'url') return new Redis(target.url, common);
  return new Redis({
    ...common,
    name: target.masterName,
    sentinels: target.sentinels,
    ...(target.username === undefined ? {} : { username: target.username }),
    ...(target.password === undefined ? {} : { password: target.password }),
    ...(target.sentinelPassword === undefined ? {} : { sentinelPassword: target.sentinelPassword }),
    ...(target.db === undefined ? {} : { db: target.db }),
    ...(target.tls ? { tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
    ...(reconnect ? {} : { sentinelRetryStrategy: () => null }),
  });
}
