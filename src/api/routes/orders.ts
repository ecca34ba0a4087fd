import type { FastifyPluginAsync } from 'fastify';
import { shopRefProblem } from '../../domain/attempts.js';
import type { PublicOrder } from '../../domain/public-order.js';
import { AcceptOrderError, acceptOrder } from '../../orders/accept-order.js';
import { newPartnerRef } from '../../orders/partner-ref.js';
import type { OrderRouter } from '../../routing/route-order.js';
import { SUBMISSION_STATES } from '../../store/local-order.js';
import type { OrderStore } from '../../store/order-store.js';
import { ORDER_STATUSES, partnerRefProblem } from '../../upstream/model.js';
import { readIsoTime } from '../../upstream/upstream-time.js';
import { ApiHttpError } from '../errors.js';
import type { FromSchema, SchemaTypes } from '../schema-types.js';
import { answerHeaders, BODY_REFUSALS, errorAnswers, REQUEST_REFUSALS, TOKEN_REFUSALS } from '../schemas.js';

/** The orders' routes: place, cancel, refresh, read and list (docs/api.md, "Routes"). */

export interface OrderRoutesOptions {
  store: OrderStore;
  /** Most orders waiting in the submission queue; beyond, POST /v1/orders answers 503 (`apiSettings`). */
  submissionBacklog: number;
  /** The Retry-After of a full backlog, in seconds: about one budget window (`apiSettings`). */
  retryAfterS: number;
  /**
   * Chooses each order's upstream (routing/router.ts), with several upstreams; without it every
   * order is the default upstream's.
   */
  router?: OrderRouter;
  /** Asks the reconciler for an early poll of an order; without it, a refresh answers 503. */
  requestPoll?: (partnerRef: string) => Promise<void>;
}

/**
 * The Retry-After of a refresh refused while Redis cannot be reached, in seconds: the API's
 * connection tries Redis again at least every 2 s (ioredis' default), so a few seconds suffice.
 */
const QUEUE_RETRY_AFTER_S = 5;

/** Default and largest page of `GET /v1/orders`. */
export const ORDER_PAGE = { default: 20, max: 100 } as const;

const refParams = {
  type: 'object',
  required: ['ref'],
  properties: { ref: { type: 'string', minLength: 1 } },
} as const;

const placeOrderHeaders = {
  type: 'object',
  properties: {
    'idempotency-key': {
      type: 'string',
      minLength: 1,
      description:
        'The partner_ref, for clients that send idempotency keys as a header: used when the body has no partner_ref; with one, both must be equal.',
    },
  },
} as const;

const placeOrderBody = {
  type: 'object',
  additionalProperties: false,
  required: ['data'],
  anyOf: [{ required: ['product_code'] }, { required: ['product_id'] }],
  properties: {
    product_code: { type: 'string', minLength: 1, maxLength: 100 },
    product_id: { type: 'string', minLength: 1, maxLength: 100 },
    data: {
      type: 'object',
      minProperties: 1,
      maxProperties: 20,
      additionalProperties: { type: 'string', maxLength: 256 },
      description: 'The target, e.g. {"user_id": "12345678", "server_id": "2001"}; every value a string.',
    },
    partner_ref: {
      type: 'string',
      minLength: 1,
      description:
        'Your idempotency key (at most 64 characters): the same ref and body answer the same order, whatever its state. Generated when absent (and no Idempotency-Key is sent).',
    },
  },
} as const;

const orderListQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    status: {
      type: 'string',
      enum: [...ORDER_STATUSES, ...SUBMISSION_STATES],
      description: 'A status (SUCCESS …) or a submission state (blocked …).',
    },
    upstream_status: {
      type: 'string',
      minLength: 1,
      description: 'The status string the upstream last sent, even one outside the statuses above.',
    },
    created_from: { type: 'string', description: 'Written here at or after this ISO 8601 time.' },
    created_to: { type: 'string', description: 'Written here before this ISO 8601 time.' },
    limit: { type: 'integer', minimum: 1, maximum: ORDER_PAGE.max, default: ORDER_PAGE.default },
    cursor: { type: 'string', description: 'next_cursor of the previous page.' },
  },
} as const;

/**
 * Whether the upstream has nothing more to tell of an order, so a refresh spends no poll on it:
 * it ended (`outcome`), and a delivered one has its serial number (which may follow a SUCCESS).
 * The reconciler's rule for settled orders (src/domain/poll-rules.ts, `isSettled`) in the public
 * form, without its stuck marking; a refund of a delivered order is the audit's to find
 * (docs/reconciler.md).
 */
const nothingLeftToLearn = (order: PublicOrder) =>
  order.outcome !== null && !(order.outcome === 'delivered' && order.serial_number === null);

const refreshAnswer = {
  type: 'object',
  required: ['requested', 'order'],
  properties: { requested: { type: 'boolean' }, order: { $ref: 'Order#' } },
} as const;

/**
 * Refuses, before the schema's validation could coerce it, a `data` value that is not a string:
 * the spec's data values are strings, and a game id sent as a number beyond 2^53 has already lost
 * digits (a top-up of the wrong account).
 */
function refuseNonStringData(body: unknown): void {
  const data = (body as { data?: unknown } | null)?.data;
  if (data === null || typeof data !== 'object' || Array.isArray(data)) return;
  for (const [key, value] of Object.entries(data)) {
    if (typeof value !== 'string') {
      throw new ApiHttpError(
        'VALIDATION_ERROR',
        `data.${key} must be a string, got ${value === null ? 'null' : typeof value}: send it in quotes, e.g. "${key}": "${String(value)}"`,
      );
    }
  }
}

/**
 * The order's partner_ref from the body's `partner_ref` and the `Idempotency-Key` header (the
 * convention of the best-known payment APIs): either names it, both must agree, and neither
 * means a new generated one. The same 64-character rule as the upstream's; with several
 * upstreams at most 61 and no `~`, room for a later attempt's `~<n>` (domain/attempts.ts).
 */
function partnerRefOf(
  body: FromSchema<typeof placeOrderBody>,
  key: string | undefined,
  severalUpstreams: boolean,
): string {
  if (key !== undefined && body.partner_ref !== undefined && key !== body.partner_ref) {
    throw new ApiHttpError(
      'VALIDATION_ERROR',
      'Idempotency-Key and partner_ref differ: they name the same thing, so send one of them, or both equal',
    );
  }
  const partnerRef = body.partner_ref ?? key ?? newPartnerRef();
  const problem =
    partnerRefProblem(partnerRef) ?? (severalUpstreams ? shopRefProblem(partnerRef) : undefined);
  if (problem) {
    throw new ApiHttpError(
      'VALIDATION_ERROR',
      `${body.partner_ref === undefined ? 'Idempotency-Key' : 'partner_ref'}: ${problem}`,
    );
  }
  return partnerRef;
}

/** An opaque cursor of the order list: the last row id seen, base64url. */
const encodeCursor = (id: number) => Buffer.from(`o:${id}`).toString('base64url');
function decodeCursor(cursor: string): number {
  const match = /^o:([1-9]\d{0,15})$/.exec(Buffer.from(cursor, 'base64url').toString());
  if (!match || !Number.isSafeInteger(Number(match[1]))) {
    throw new ApiHttpError('INVALID_CURSOR', 'cursor is not one this API gave: pass next_cursor unchanged');
  }
  return Number(match[1]);
}

/**
 * A time of a query, as an instant: an ISO 8601 date-time with `Z` or an offset. A time without
 * one (or a date alone) is refused rather than read in some zone: the shop's is unknown here.
 */
function parseTime(name: string, value: string): number {
  const time = readIsoTime(value);
  if (time?.hasTime && time.hasOffset) return time.ms;
  // The `+` of an offset that was not URL-encoded arrives as a space.
  const plusHint = /\s/.test(value.trim()) ? ' (in a URL, write + as %2B)' : '';
  const problem = !time
    ? `must be an ISO 8601 date-time with Z or an offset${plusHint}`
    : !time.hasTime
      ? 'is a date without a time: give a time and Z or an offset'
      : 'has no offset: add Z or an offset such as +07:00';
  throw new ApiHttpError('VALIDATION_ERROR', `${name} ${problem}, e.g. 2026-11-25T00:00:00Z`);
}

/**
 * The orders (docs/api.md, "Routes"): placing one (`acceptOrder` decides), cancelling one never
 * sent, asking for an early poll, reading one and listing them a page at a time.
 */
export const orderRoutes: FastifyPluginAsync<OrderRoutesOptions> = async (base, options) => {
  const app = base.withTypeProvider<SchemaTypes>();
  const { store, submissionBacklog, retryAfterS, requestPoll, router } = options;

  /** The order a route names, by partner_ref or invoice number, or the 404 that says so. */
  async function mustFindOrder(ref: string): Promise<PublicOrder> {
    const order = await store.queries.getPublicOrder(ref);
    if (!order)
      throw new ApiHttpError('ORDER_NOT_FOUND', `no order has partner_ref or invoice number ${ref}`);
    return order;
  }

  app.post(
    '/v1/orders',
    {
      config: { scope: 'orders:write' },
      preValidation: async (request) => refuseNonStringData(request.body),
      schema: {
        operationId: 'placeOrder',
        tags: ['orders'],
        summary: 'Place an order',
        description:
          'Accepted at once (written to the store, submission `queued`) and sent upstream by the worker in arrival order, at the pace of the upstream budget. Idempotent on `partner_ref` (or `Idempotency-Key`): the same ref and body answer the same order in any state, another body is 409. Checked against the local catalog first (422). Beyond API_SUBMISSION_BACKLOG waiting orders, 503 and nothing stored (docs/api.md, "Placing orders").',
        headers: placeOrderHeaders,
        body: placeOrderBody,
        response: {
          200: {
            $ref: 'Order#',
            description:
              'A repeat of an order placed before with this partner_ref and body: that order, as it is now.',
            headers: answerHeaders('Idempotent-Replayed'),
          },
          202: { $ref: 'Order#', description: 'Accepted: the order, queued for submission.' },
          ...errorAnswers({
            ...REQUEST_REFUSALS,
            VALIDATION_ERROR:
              'a body its schema refuses, a data value that is not a string, a partner_ref over 64 characters, an Idempotency-Key that differs from partner_ref, or a control character or lone surrogate in any text',
            ...BODY_REFUSALS,
            ...TOKEN_REFUSALS,
            IDEMPOTENCY_CONFLICT:
              'this partner_ref was used for another product or other data: use a new ref for a new order',
            UNKNOWN_PRODUCT:
              'the local catalog does not list the product (or product_code and product_id name different ones)',
            PRODUCT_INACTIVE: 'the product is not active',
            INVALID_TARGET:
              'data does not match the product’s published rules; the message names the field and the pattern',
            BACKLOG_FULL:
              'API_SUBMISSION_BACKLOG orders already wait; nothing was stored: retry after Retry-After seconds',
          }),
        },
      },
    },
    async (request, reply) => {
      const { body } = request;
      const partnerRef = partnerRefOf(body, request.headers['idempotency-key'], router !== undefined);
      let accepted: Awaited<ReturnType<typeof acceptOrder>>;
      try {
        accepted = await acceptOrder(
          store,
          partnerRef,
          {
            ...(body.product_code === undefined ? {} : { product_code: body.product_code }),
            ...(body.product_id === undefined ? {} : { product_id: body.product_id }),
            data: body.data,
          },
          { submissionBacklog, retryAfterS, ...(router ? { router } : {}) },
        );
      } catch (error) {
        if (!(error instanceof AcceptOrderError)) throw error;
        throw new ApiHttpError(
          error.code,
          error.message,
          error.code === 'BACKLOG_FULL' ? retryAfterS : undefined,
        );
      }
      if (accepted.replayed) {
        reply.header('idempotent-replayed', 'true');
        return reply.code(200).send(accepted.order);
      }
      request.log.info({ partnerRef, token: request.token?.id }, 'order queued');
      return reply.code(202).send(accepted.order);
    },
  );

  app.post(
    '/v1/orders/:ref/cancel',
    {
      config: { scope: 'orders:write' },
      schema: {
        operationId: 'cancelOrder',
        tags: ['orders'],
        summary: 'Cancel an order never sent',
        description:
          'An order never sent (submission `queued`, or `blocked` with nothing in doubt) becomes `cancelled` and is never sent; cancelling it again answers the same order. One whose create was sent or is being sent is 409: follow it to its outcome (docs/api.md, "Cancelling").',
        params: refParams,
        response: {
          200: { $ref: 'Order#', description: 'The order, cancelled (now or before).' },
          ...errorAnswers({
            ...REQUEST_REFUSALS,
            ...BODY_REFUSALS,
            ...TOKEN_REFUSALS,
            ORDER_NOT_FOUND: 'no order has this partner_ref or invoice number',
            ORDER_ALREADY_SUBMITTED:
              'the order’s create was sent or is being sent: it can only be followed to its outcome',
          }),
        },
      },
    },
    async (request) => {
      const found = await mustFindOrder(request.params.ref);
      const result = await store.writer.cancelOrder(found.partner_ref, {
        code: 'CANCELLED',
        detail: `cancelled by the shop (token ${request.token?.id ?? '?'})`,
      });
      if (!result.cancelled && result.why === 'submitted') {
        throw new ApiHttpError(
          'ORDER_ALREADY_SUBMITTED',
          `order ${found.partner_ref} was already sent to the upstream (submission ${result.order.submissionState}): it can no longer be cancelled; follow it to its outcome`,
        );
      }
      if (result.cancelled) request.log.info({ partnerRef: found.partner_ref }, 'order cancelled');
      return (await store.queries.getPublicOrderByPartnerRef(found.partner_ref))!;
    },
  );

  app.post(
    '/v1/orders/:ref/refresh',
    {
      config: { scope: 'orders:write' },
      schema: {
        operationId: 'refreshOrder',
        tags: ['orders'],
        summary: 'Ask for an early poll of an order',
        description:
          'The order’s status is read from the upstream as soon as a poll slot frees; the answer lands in the order and the change feed. A settled order is answered at once, with nothing spent of the upstream’s budget (docs/api.md, "Routes").',
        params: refParams,
        response: {
          200: {
            ...refreshAnswer,
            description:
              'The order is settled (an outcome, and a delivered one has its serial number): nothing is asked upstream.',
          },
          202: {
            ...refreshAnswer,
            description: 'An early poll is asked; its answer lands in the order and the feed.',
          },
          ...errorAnswers({
            ...REQUEST_REFUSALS,
            ...BODY_REFUSALS,
            ...TOKEN_REFUSALS,
            ORDER_NOT_FOUND: 'no order has this partner_ref or invoice number',
            ORDER_NOT_SUBMITTED:
              'the order still waits in the submission queue: there is nothing to read upstream yet',
            QUEUE_UNAVAILABLE:
              'the early-poll queue (Redis) cannot be reached; retry after Retry-After seconds',
          }),
        },
      },
    },
    async (request, reply) => {
      const order = await mustFindOrder(request.params.ref);
      if (order.submission === 'queued') {
        throw new ApiHttpError(
          'ORDER_NOT_SUBMITTED',
          `order ${order.partner_ref} still waits in the submission queue: there is nothing to read upstream yet`,
        );
      }
      if (nothingLeftToLearn(order)) return reply.code(200).send({ requested: false, order });
      if (!requestPoll) {
        throw new ApiHttpError(
          'QUEUE_UNAVAILABLE',
          'early polls are not available here: the API has no Redis',
          QUEUE_RETRY_AFTER_S,
        );
      }
      try {
        await requestPoll(order.partner_ref);
      } catch (err) {
        request.log.error({ err, partnerRef: order.partner_ref }, 'early poll not requested');
        throw new ApiHttpError(
          'QUEUE_UNAVAILABLE',
          'the poll request could not be queued (Redis); retry after Retry-After seconds',
          QUEUE_RETRY_AFTER_S,
        );
      }
      // The answer lands in the order and the change feed; read either.
      return reply.code(202).send({ requested: true, order });
    },
  );

  app.get(
    '/v1/orders/:ref',
    {
      config: { scope: 'orders:read' },
      schema: {
        operationId: 'getOrder',
        tags: ['orders'],
        summary: 'One order',
        description:
          'The order whose partner_ref or upstream invoice number is `ref` (docs/api.md, "The order").',
        params: refParams,
        response: {
          200: { $ref: 'Order#', description: 'The order.' },
          ...errorAnswers({
            ...REQUEST_REFUSALS,
            ...TOKEN_REFUSALS,
            ORDER_NOT_FOUND: 'no order has this partner_ref or invoice number',
          }),
        },
      },
    },
    async (request) => mustFindOrder(request.params.ref),
  );

  app.get(
    '/v1/orders',
    {
      config: { scope: 'orders:read' },
      schema: {
        operationId: 'listOrders',
        tags: ['orders'],
        summary: 'Orders, newest first, a page at a time',
        description:
          'Filtered by status or submission state, by the upstream’s status string and by when they were written here. `next_cursor` is the position of the last order of the page, so orders added meanwhile never shift a page (docs/api.md, "Routes").',
        querystring: orderListQuery,
        response: {
          200: {
            description: 'A page of orders.',
            type: 'object',
            required: ['data', 'next_cursor'],
            properties: {
              data: { type: 'array', items: { $ref: 'Order#' } },
              next_cursor: { type: 'string', nullable: true, description: 'null on the last page.' },
            },
          },
          ...errorAnswers({
            ...REQUEST_REFUSALS,
            VALIDATION_ERROR:
              'a parameter its schema refuses (a status it does not know, a limit out of range), a time without Z or an offset, created_from not before created_to, or a control character or lone surrogate in any text',
            INVALID_CURSOR: 'a cursor this API did not give: pass next_cursor unchanged',
            ...TOKEN_REFUSALS,
          }),
        },
      },
    },
    async (request) => {
      const q = request.query;
      const createdFrom =
        q.created_from === undefined ? undefined : parseTime('created_from', q.created_from);
      const createdTo = q.created_to === undefined ? undefined : parseTime('created_to', q.created_to);
      if (createdFrom !== undefined && createdTo !== undefined && createdFrom >= createdTo) {
        throw new ApiHttpError(
          'VALIDATION_ERROR',
          'created_from must be before created_to (created_to is exclusive): swap them, or drop one',
        );
      }
      const page = await store.queries.pageOrders({
        limit: q.limit,
        ...(q.status === undefined ? {} : { status: q.status }),
        ...(q.upstream_status === undefined ? {} : { upstreamStatus: q.upstream_status }),
        ...(createdFrom === undefined ? {} : { createdFrom }),
        ...(createdTo === undefined ? {} : { createdTo }),
        ...(q.cursor === undefined ? {} : { beforeId: decodeCursor(q.cursor) }),
      });
      const more = page.length > q.limit;
      const rows = more ? page.slice(0, q.limit) : page;
      return { data: rows.map((r) => r.order), next_cursor: more ? encodeCursor(rows.at(-1)!.id) : null };
    },
  );
};
