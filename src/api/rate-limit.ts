import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { ApiHttpError } from './errors.js';
import { RESPONSE_HEADERS } from './schemas.js';

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

const integer = { type: 'integer', minimum: 0 } as const;

/** The headers of {@link apiRateLimitPlugin}, as the OpenAPI document's `components.headers`. */
const RATE_LIMIT_HEADERS = {
  'x-ratelimit-limit': {
    description: 'Requests a minute this token may make (API_RATE_LIMIT_PER_MIN; absent when 0, no limit).',
    schema: integer,
  },
  'x-ratelimit-remaining': { description: 'Requests left in this window.', schema: integer },
  'x-ratelimit-reset': {
    description: 'Seconds until this window ends and the budget is whole again.',
    schema: integer,
  },
  'Retry-After': RESPONSE_HEADERS['Retry-After'],
} as const;

interface OpenApiResponse {
  headers?: Record<string, unknown>;
  [field: string]: unknown;
}
interface OpenApiDocument {
  components?: { headers?: Record<string, unknown> };
  paths?: Record<string, Record<string, { responses?: Record<string, OpenApiResponse> }>>;
}

/** Answers given before the budget is counted (the token's refusals): they carry no rate-limit headers. */
const UNCOUNTED = new Set(['401', '403']);

const headerRefs = (names: readonly string[]) =>
  Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));

/**
 * `document` (an OpenAPI 3 document of the API, @fastify/swagger's `transformObject`) with the
 * rate limit on every operation, all of which need a token: the `x-ratelimit-*` headers on each
 * of its answers but a refusal of the token, and its 429 `RATE_LIMITED` answer with `Retry-After`.
 */
export function documentRateLimit<T extends object>(document: T): T {
  const counted = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'];
  const result: T & OpenApiDocument = structuredClone(document);
  result.components = {
    ...result.components,
    headers: { ...result.components?.headers, ...RATE_LIMIT_HEADERS },
  };
  for (const operations of Object.values(result.paths ?? {})) {
    for (const operation of Object.values(operations)) {
      const responses = operation.responses ?? {};
      for (const [status, response] of Object.entries(responses)) {
        if (!UNCOUNTED.has(status)) response.headers = { ...response.headers, ...headerRefs(counted) };
      }
      responses['429'] = {
        description: `RATE_LIMITED: the token made its API_RATE_LIMIT_PER_MIN requests of this minute (docs/api.md, "Rate limit")`,
        headers: headerRefs(['Retry-After', ...counted]),
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      };
      operation.responses = responses;
    }
  }
  return result;
}
