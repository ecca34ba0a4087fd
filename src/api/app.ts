import fastifySwagger from '@fastify/swagger';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { jsonClientErrorHandler } from '../shared/client-error.js';
import { jsonBodyParser } from '../shared/request-errors.js';
import { authPlugin } from './auth.js';
import { ApiHttpError, apiErrorHandler, clientErrorAnswer, frameworkErrorAnswer } from './errors.js';
import { requestTextProblem } from './input-rules.js';
import { openapiOptions } from './openapi.js';
import { type ApiRateLimitOptions, apiRateLimitPlugin } from './rate-limit.js';
import { balanceRoutes } from './routes/balance.js';
import { catalogRoutes } from './routes/catalog.js';
import { eventRoutes } from './routes/events.js';
import { type OrderRoutesOptions, orderRoutes } from './routes/orders.js';
import {
  balanceDriftSchema,
  balanceSchema,
  candidateSchema,
  categorySchema,
  errorSchema,
  feedEventSchema,
  priceChangeSchema,
  productSchema,
  publicOrderSchema,
  upstreamBalanceSchema,
} from './schemas.js';

export { API_ERRORS, type ApiErrorCode, ApiHttpError } from './errors.js';
export { ORDER_PAGE } from './routes/orders.js';

/**
 * The shop API as a Fastify instance, built by a function so that tests drive it with `inject`
 * or a port of their own; the process around it (settings, Redis, listen, signals) is server.ts.
 */

/** The largest request body, in bytes: Fastify's default, named so its refusal can say it. */
const BODY_LIMIT = 1_048_576;

export interface ApiAppOptions extends OrderRoutesOptions {
  logger?: Logger;
  /** Each token's requests a minute (`apiSettings`, rate-limit.ts); without it, no limit. */
  rateLimit?: ApiRateLimitOptions;
  /**
   * Whose `X-Forwarded-For` gives a request's address (`request.ip`: its rate-limit key without a
   * token, its log lines): Fastify's `trustProxy`, from API_TRUST_PROXY. Default: false, nobody's.
   */
  trustProxy?: boolean | string[];
}

/**
 * The shop-facing HTTP API (docs/api.md): bearer tokens with scopes (auth.ts), one plugin per
 * resource (routes/), errors in one shape (errors.ts), and its OpenAPI 3.1 document at
 * `/openapi.json`, generated from the route schemas (openapi.ts).
 */
export async function buildApiApp(options: ApiAppOptions): Promise<FastifyInstance> {
  const { store, logger } = options;
  const loggerInstance: FastifyBaseLogger | undefined = logger;
  const app = Fastify({
    ...(loggerInstance ? { loggerInstance } : { logger: false }),
    http: { requireHostHeader: false },
    trustProxy: options.trustProxy ?? false,
    bodyLimit: BODY_LIMIT,
    clientErrorHandler: jsonClientErrorHandler(clientErrorAnswer, logger),
    frameworkErrors: frameworkErrorAnswer,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: true, allErrors: false } },
  });

  await app.register(fastifySwagger, openapiOptions());
  for (const schema of [
    publicOrderSchema,
    candidateSchema,
    productSchema,
    priceChangeSchema,
    categorySchema,
    upstreamBalanceSchema,
    balanceSchema,
    balanceDriftSchema,
    feedEventSchema,
    errorSchema,
  ]) {
    app.addSchema(schema);
  }

  // JSON only: text/plain is 415 like any other type, a body that does not parse is INVALID_JSON.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, jsonBodyParser(parseJson));

  await app.register(authPlugin, { tokens: store.tokens });
  if (options.rateLimit) await app.register(apiRateLimitPlugin, options.rateLimit);
  app.addHook('preValidation', async (request) => {
    const problem = requestTextProblem(request);
    if (problem) throw new ApiHttpError('VALIDATION_ERROR', problem);
  });
  app.setErrorHandler(apiErrorHandler(BODY_LIMIT));
  app.setNotFoundHandler(async (request) => {
    throw new ApiHttpError(
      'NOT_FOUND',
      `no route ${request.method} ${request.url.split('?')[0]}; see /openapi.json`,
    );
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  await app.register(orderRoutes, options);
  await app.register(catalogRoutes, { store });
  await app.register(balanceRoutes, { store });
  await app.register(eventRoutes, { store });
  return app;
}
