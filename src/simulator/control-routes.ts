import type { FastifyPluginAsync } from 'fastify';
import { type ZodType, z } from 'zod';
import { productPatchSchema } from './catalog.js';
import { faultsPatchSchema } from './faults.js';
import { isLoopback } from './ip-address.js';
import { memberPatchSchema, toControlMember } from './members.js';
import { DAY_MS, type SimEngine } from './sim-engine.js';
import { simulatorError, upstreamError } from './sim-errors.js';
import { toControlOrder, toPublicOrder } from './sim-order.js';

/** Path prefix of the control API. */
export const CONTROL_PREFIX = '/__sim';

const statusChangeSchema = z.strictObject({
  status: z.string().min(1, 'must be a non-empty string'),
  serial_number: z.string().min(1, 'must be a non-empty string').nullable().optional(),
  message: z.string().nullable().optional(),
});

const refundPlanSchema = z.strictObject({
  /** Simulated days after SUCCESS (× the simulator's timeScale), may be fractional. */
  after_days: z.number().min(0, 'must be >= 0').max(3_650, 'must be <= 3650'),
  /** Every webhook of the refund recorded as dropped and never sent. Default true. */
  lose_webhooks: z.boolean().default(true),
});

/**
 * Validates a control API body. Throws 400 VALIDATION_ERROR naming the field, e.g.
 * `webhook_drop: must be between 0 and 1` or `bogus: unknown key`.
 */
function parseBody<T>(schema: ZodType<T>, body: unknown): T {
  const result = schema.safeParse(body ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const detail =
    issue.code === 'unrecognized_keys'
      ? `${issue.keys.join(', ')}: unknown key`
      : `${issue.path.length > 0 ? issue.path.join('.') : 'body'}: ${issue.message}`;
  throw upstreamError('VALIDATION_ERROR', detail);
}

/** The control API of docs/simulator.md, mounted at {@link CONTROL_PREFIX}; loopback callers only. */
export function controlRoutes(engine: SimEngine): FastifyPluginAsync {
  return async (app) => {
    app.addHook('onRequest', async (request) => {
      if (!isLoopback(request.ip)) {
        throw simulatorError('FORBIDDEN', 'the control API answers loopback callers only');
      }
    });

    // Lenient here only: an empty body with a JSON content type means "no fields".
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, text, done) => {
      try {
        done(null, text === '' ? undefined : JSON.parse(text as string));
      } catch (error) {
        done(upstreamError('VALIDATION_ERROR', `body: ${(error as Error).message}`), undefined);
      }
    });

    app.post('/reset', async () => {
      engine.reset();
      return { ok: true };
    });

    app.get('/orders', async () => Array.from(engine.orders.all(), toControlOrder));

    app.post<{ Params: { ref: string } }>('/orders/:ref/status', async (request) => {
      const change = parseBody(statusChangeSchema, request.body);
      const order = engine.orders.findAny(request.params.ref);
      if (!order) throw upstreamError('ORDER_NOT_FOUND');
      const from = order.status;
      const verdict = engine.changeStatus(order, change);
      if (!verdict.apply) throw simulatorError('TRANSITION_NOT_ALLOWED', `${from} -> ${change.status}`);
      return toPublicOrder(order);
    });

    app.get<{ Params: { ref: string } }>('/orders/:ref/timeline', async (request) => {
      const order = engine.orders.findAny(request.params.ref);
      if (!order) throw upstreamError('ORDER_NOT_FOUND');
      const timeline = order.timeline ?? { steps: [], stuck: false };
      return {
        invoice_number: order.invoice_number,
        partner_ref: order.partner_ref,
        stuck: timeline.stuck,
        steps: timeline.steps.map((step) => ({
          status: step.status,
          with_serial: step.withSerial,
          at_ms: step.at_ms,
        })),
      };
    });

    app.post<{ Params: { ref: string } }>('/orders/:ref/refund', async (request) => {
      const plan = parseBody(refundPlanSchema, request.body);
      const order = engine.orders.findAny(request.params.ref);
      if (!order) throw upstreamError('ORDER_NOT_FOUND');
      if (order.status !== 'PENDING' && order.status !== 'PROCESSING' && order.status !== 'SUCCESS') {
        throw simulatorError('TRANSITION_NOT_ALLOWED', `${order.status} -> REFUNDED`);
      }
      engine.planRefund(order, { afterMs: plan.after_days * DAY_MS, loseWebhooks: plan.lose_webhooks });
      return { ok: true, invoice_number: order.invoice_number, ...plan };
    });

    app.get('/members', async () => engine.members.all().map(toControlMember));

    app.patch<{ Params: { member_id: string } }>('/members/:member_id', async (request) => {
      const member = engine.members.findById(request.params.member_id);
      if (!member) throw simulatorError('MEMBER_NOT_FOUND');
      engine.members.patch(member, parseBody(memberPatchSchema, request.body));
      return toControlMember(member);
    });

    app.patch<{ Params: { code: string } }>('/products/:code', async (request) => {
      const patch = parseBody(productPatchSchema, request.body);
      const product = engine.catalog.patchProduct(request.params.code, patch);
      if (!product) throw simulatorError('PRODUCT_NOT_FOUND', `no product has code ${request.params.code}`);
      const { targetRules: _rules, ...record } = product;
      return record;
    });

    app.get('/webhooks', async () => engine.webhooks.attempts());

    app.get('/stats', async () => ({
      webhooks: engine.webhooks.stats(),
      orders: engine.orders.stats(),
    }));

    app.get('/faults', async () => engine.faults.current);

    app.post('/faults', async (request) => engine.faults.merge(parseBody(faultsPatchSchema, request.body)));

    app.setNotFoundHandler(async (request) => {
      throw simulatorError('ROUTE_NOT_FOUND', `no route ${request.method} ${request.url}`);
    });
  };
}
