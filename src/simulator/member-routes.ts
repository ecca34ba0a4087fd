import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { authenticateMember } from './member-auth.js';
import { type MemberState, toProfile } from './members.js';
import type { SimEngine } from './sim-engine.js';
import { simulatorError, upstreamError } from './sim-errors.js';
import { toPublicOrder } from './sim-order.js';

const MEMBER = 'simMember';

function memberOf(request: FastifyRequest): MemberState {
  return request.getDecorator<MemberState>(MEMBER);
}

/** `?category_code=`: absent or empty means every category. */
function categoryFilter(query: unknown): string | undefined {
  const value = (query as Record<string, unknown>).category_code;
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string')
    throw upstreamError('VALIDATION_ERROR', 'category_code: give it at most once');
  return value;
}

/** The member API of spec §4, mounted at `/v1/member-api`. */
export function memberRoutes(engine: SimEngine): FastifyPluginAsync {
  return async (app) => {
    app.decorateRequest(MEMBER, null);

    // Every request, unknown routes included: the 5xx fault first (nothing else happens), then
    // spec §5 auth, then the rate limit, which counts only requests that passed auth.
    app.addHook('onRequest', async (request) => {
      if (engine.faults.roll('error_5xx')) throw simulatorError('SERVICE_UNAVAILABLE');
      const member = authenticateMember(engine.members, request.headers, request.ip);
      const decision = engine.limiter.admit(member.member_id);
      if (!decision.allowed) {
        throw upstreamError('TOO_MANY_REQUESTS', undefined, { 'retry-after': String(decision.retryAfterS) });
      }
      request.setDecorator(MEMBER, member);
    });

    app.get('/profile', async (request) => toProfile(memberOf(request)));

    app.get('/categories', async () => engine.catalog.listCategories());

    app.get('/products', async (request) => {
      return engine.catalog.listProducts(memberOf(request).member_role, categoryFilter(request.query));
    });

    app.post('/orders', async (request, reply) => {
      const { created, order } = engine.createOrder(memberOf(request), request.body);
      const answer = toPublicOrder(order);
      let dropAnswer = engine.faults.roll('create_drop_response');
      const delayMs = engine.faults.current.create_response_delay_ms;
      if (delayMs > 0 && !(await engine.delayResponse(delayMs))) dropAnswer = true;
      if (dropAnswer) {
        reply.hijack();
        request.raw.socket.destroy();
        return reply;
      }
      return reply.code(created ? 201 : 200).send(answer);
    });

    app.get<{ Params: { ref: string } }>('/orders/:ref', async (request) => {
      const order = engine.orders.findForMember(memberOf(request).member_id, request.params.ref);
      if (!order) throw upstreamError('ORDER_NOT_FOUND');
      return toPublicOrder(order);
    });

    app.setNotFoundHandler(async (request) => {
      throw simulatorError('ROUTE_NOT_FOUND', `no route ${request.method} ${request.url}`);
    });
  };
}
