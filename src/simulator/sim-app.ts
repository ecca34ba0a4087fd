import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { API_PREFIX, errorBody } from '../upstream/model.js';
import { CONTROL_PREFIX, controlRoutes } from './control-routes.js';
import { memberRoutes } from './member-routes.js';
import type { SimEngine } from './sim-engine.js';
import { SimHttpError, simulatorError, upstreamError } from './sim-errors.js';

/**
 * Room for a URL-encoded 64-character partner_ref of 4-byte characters (12 encoded bytes each);
 * Fastify's default of 100 would answer such a ref 414.
 */
const MAX_PARAM_LENGTH = 1024;

/**
 * Builds the simulator's HTTP app (member API and control API) without listening, so tests can
 * also drive it with `inject()`. `logger` undefined: no Fastify logging at all (the fast path).
 */
export function buildSimApp(engine: SimEngine, logger?: Logger): FastifyInstance {
  const loggerInstance: FastifyBaseLogger | undefined = logger;
  const app = Fastify({
    ...(loggerInstance ? { loggerInstance } : { logger: false }),
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // close() must not wait for keep-alive clients or for answers the create_drop_response fault hijacked.
    forceCloseConnections: true,
  });

  app.setErrorHandler((error: FastifyError | SimHttpError, request, reply) => {
    if (error instanceof SimHttpError) {
      return reply.code(error.body.statusCode).headers(error.headers).send(error.body);
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // Fastify's own 4xx come from the body: bad JSON, empty JSON, wrong content type, too large.
      const validation = upstreamError('VALIDATION_ERROR', `body: ${error.message}`);
      return reply.code(400).send(validation.body);
    }
    request.log.error({ err: error }, 'simulator failure');
    return reply.code(500).send(errorBody('INTERNAL_ERROR', error.message));
  });

  app.register(memberRoutes(engine), { prefix: API_PREFIX });
  app.register(controlRoutes(engine), { prefix: CONTROL_PREFIX });
  app.setNotFoundHandler(async (request) => {
    throw simulatorError('ROUTE_NOT_FOUND', `no route ${request.method} ${request.url}`);
  });
  return app;
}
