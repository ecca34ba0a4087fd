import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { ApiHttpError } from './errors.js';

/** The shop API's limit on each token's requests (docs/api.md, "Rate limit"). */
export interface ApiRateLimitOptions {
  /** Requests a minute per token (`API_RATE_LIMIT_PER_MIN`, 600); `0`: no limit. */
  perMinute: number;
  /** Where the counts live, shared by every API process on it; without it, this process's memory. */
  redis?: Redis;
}

/** The window of {@link ApiRateLimitOptions.perMinute}. */
const WINDOW_MS = 60_000;

/** Prefix of the counts in Redis (`h2h-sync:api-rate:token:<id>`), each expiring with its window. */
const REDIS_NAMESPACE = 'h2h-sync:api-rate:';

/**
 * Whose budget a request spends: its token's, by id (never the secret, which is not stored);
 * a route without a token (the OpenAPI document), its address's.
 */
const budgetKey = (request: FastifyRequest) =>
  request.token ? `token:${request.token.id}` : `ip:${request.ip}`;

function rateLimited(request: FastifyRequest, max: number, ttlMs: number): ApiHttpError {
  const who = request.token ? `token ${request.token.id} (${request.token.name})` : `address ${request.ip}`;
  const retryS = Math.max(1, Math.ceil(ttlMs / 1000));
  return new ApiHttpError(
    'RATE_LIMITED',
    `${who} made its ${max} requests of this minute (API_RATE_LIMIT_PER_MIN); retry in ${retryS} s (Retry-After)`,
  );
}

/**
 * A budget of `perMinute` requests a minute per token on every route of the app it is registered
 * on, in a fixed window that starts at the token's first request; beyond it, 429 `RATE_LIMITED`
 * with `Retry-After`. Every counted answer carries `x-ratelimit-limit`, `x-ratelimit-remaining`
 * and `x-ratelimit-reset` (seconds until the window ends). Register it after `authPlugin`: its
 * hook then runs after the token is checked, so a request refused for its token (401, 403) is
 * answered as before and spends no budget. While Redis cannot be reached, requests are served
 * without a limit, as the API serves the store without Redis. Not encapsulated (`skip-override`).
 */
export const apiRateLimitPlugin: FastifyPluginAsync<ApiRateLimitOptions> = async (app, options) => {
  if (options.perMinute === 0) return;
  await app.register(fastifyRateLimit, {
    max: options.perMinute,
    timeWindow: WINDOW_MS,
    keyGenerator: budgetKey,
    ...(options.redis ? { redis: options.redis, nameSpace: REDIS_NAMESPACE } : {}),
    skipOnError: true,
    errorResponseBuilder: (request, { max, ttl }) => rateLimited(request, max, ttl),
  });
};
Object.assign(apiRateLimitPlugin, { [Symbol.for('skip-override')]: true });
