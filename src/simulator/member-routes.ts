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

/** JSON when the body parses as JSON, else plain text: a proxy's or framework's 404 page. */
function contentTypeOf(body: string): string {
  try {
    JSON.parse(body);
    return 'application/json; charset=utf-8';
  } catch {
    return 'text/plain; charset=utf-8';
  }
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

    app.get<{ Params: { ref: string } }>('/orders/:ref', async (request, reply) => {
      const { ref } = request.params;
      const { order_read_errors: failing, order_not_found_body: notFoundBody } = engine.faults.current;
      const order = engine.orders.findForMember(memberOf(request).member_id, ref);
      if (
        failing.length > 0 &&
        [ref, order?.partner_ref, order?.invoice_number].some((r) => r !== undefined && failing.includes(r))
      ) {
        throw upstreamError('INTERNAL_ERROR', `reading order ${ref} failed`);
      }
      if (!order && notFoundBody !== null) {
        return reply.code(404).type(contentTypeOf(notFoundBody)).send(notFoundBody);
      }
      if (!order) throw upstreamError('ORDER_NOT_FOUND');
      return toPublicOrder(order);
    });

    app.setNotFoundHandler(async (request) => {
      throw simulatorError('ROUTE_NOT_FOUND', `no route ${request.method} ${request.url}`);
    });
  };
}
