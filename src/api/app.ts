import fastifySwagger from '@fastify/swagger';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { Logger } from 'pino';
import { AcceptOrderError, acceptOrder } from '../orders/accept-order.js';
import { newPartnerRef } from '../orders/partner-ref.js';
import type { PublicOrder } from '../orders/public-order.js';
import { CLIENT_ERROR_STATUS, jsonClientErrorHandler } from '../shared/client-error.js';
import type { ApiScope, ApiToken } from '../store/api-tokens.js';
import { MAX_FEED_PAGE } from '../store/feed.js';
import type { OrderStore } from '../store/order-store.js';
import { partnerRefProblem } from '../upstream/model.js';
import { readIsoTime } from '../upstream/upstream-time.js';
import { MAX_FEED_SEQ, requestTextProblem } from './input-rules.js';
import {
  balanceSchema,
  categorySchema,
  errorSchema,
  feedEventSchema,
  priceChangeSchema,
  productSchema,
  publicOrderSchema,
} from './schemas.js';

/**
 * Every error answer of the shop API: its HTTP status and what to do. The body is always
 * `{"error": {"code", "message"}}` (docs/api.md, "Errors"), the message naming the fix.
 */
export const API_ERRORS = {
  VALIDATION_ERROR: 400,
  INVALID_CURSOR: 400,
  BAD_REQUEST: 400,
  TOKEN_MISSING: 401,
  TOKEN_INVALID: 401,
  TOKEN_REVOKED: 401,
  SCOPE_MISSING: 403,
  ORDER_NOT_FOUND: 404,
  UNKNOWN_PRODUCT: 422,
  PRODUCT_INACTIVE: 422,
  INVALID_TARGET: 422,
  IDEMPOTENCY_CONFLICT: 409,
  ORDER_NOT_SUBMITTED: 409,
  ORDER_ALREADY_SUBMITTED: 409,
  BACKLOG_FULL: 503,
  QUEUE_UNAVAILABLE: 503,
  NOT_FOUND: 404,
  REQUEST_TIMEOUT: 408,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  HEADERS_TOO_LARGE: 431,
  INTERNAL_ERROR: 500,
} as const satisfies Record<string, number>;
export type ApiErrorCode = keyof typeof API_ERRORS;

/** An error a route throws to answer with one of {@link API_ERRORS}. */
export class ApiHttpError extends Error {
  override name = 'ApiHttpError';
  constructor(
    readonly code: ApiErrorCode,
    message: string,
  ) {
    super(message);
  }
}

const errorBody = (code: ApiErrorCode, message: string) => ({ error: { code, message } });

const CREATE_TOKEN_HINT = 'create one with `h2h-sync tokens create --name NAME --scope orders:read`';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope a route needs; routes without one are public (the OpenAPI document). */
    scope?: ApiScope;
  }
  interface FastifyRequest {
    token?: ApiToken;
  }
}

export interface ApiAppOptions {
  store: OrderStore;
  logger?: Logger;
  /** Most orders waiting in the submission queue; beyond, POST /v1/orders answers 503 (`apiSettings`). */
  submissionBacklog: number;
  /** The Retry-After of a full backlog, in seconds: about one budget window (`apiSettings`). */
  retryAfterS: number;
  /**
   * Asks the reconciler for an early poll of an order (the poll-request queue in Redis); without
   * it, POST /v1/orders/:ref/refresh answers 503.
   */
  requestPoll?: (partnerRef: string) => Promise<void>;
}

/** What POST /v1/orders takes. */
interface PlaceOrderBody {
  product_code?: string;
  product_id?: string;
  data: Record<string, string>;
  partner_ref?: string;
}

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
 * means a new generated one. The same 64-character rule as the upstream's.
 */
function partnerRefOf(body: PlaceOrderBody, header: string | string[] | undefined): string {
  const key = Array.isArray(header) ? header[0] : header;
  if (key !== undefined && body.partner_ref !== undefined && key !== body.partner_ref) {
    throw new ApiHttpError(
      'VALIDATION_ERROR',
      'Idempotency-Key and partner_ref differ: they name the same thing, so send one of them, or both equal',
    );
  }
  const partnerRef = body.partner_ref ?? key ?? newPartnerRef();
  const problem = partnerRefProblem(partnerRef);
  if (problem) {
    throw new ApiHttpError(
      'VALIDATION_ERROR',
      `${body.partner_ref === undefined ? 'Idempotency-Key' : 'partner_ref'}: ${problem}`,
    );
  }
  return partnerRef;
}

/** Default and largest page of `GET /v1/orders`. */
export const ORDER_PAGE = { default: 20, max: 100 } as const;

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
function parseTime(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
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
 * The shop-facing HTTP API (docs/api.md): bearer tokens with scopes, orders and the change feed
 * in the public order representation, errors in one shape, and its OpenAPI 3 document at
 * `/openapi.json`, generated from the route schemas.
 */
export async function buildApiApp(options: ApiAppOptions): Promise<FastifyInstance> {
  const { store, logger } = options;
  const loggerInstance: FastifyBaseLogger | undefined = logger;
  const app = Fastify({
    ...(loggerInstance ? { loggerInstance } : { logger: false }),
    http: { requireHostHeader: false },
    clientErrorHandler: jsonClientErrorHandler((kind) => {
      const status = CLIENT_ERROR_STATUS[kind];
      const code: ApiErrorCode =
        kind === 'timeout'
          ? 'REQUEST_TIMEOUT'
          : kind === 'headers_too_large'
            ? 'HEADERS_TOO_LARGE'
            : 'BAD_REQUEST';
      return {
        status,
        body: errorBody(code, 'the request could not be read; check its framing and header sizes'),
      };
    }, logger),
    frameworkErrors: (error, _request, reply) => {
      void (reply as FastifyReply)
        .code(400)
        .send(errorBody('BAD_REQUEST', `the request URL is malformed (${error.code})`));
    },
    ajv: { customOptions: { removeAdditional: false, coerceTypes: true, allErrors: false } },
  });

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'h2h-sync shop API',
        version: '1',
        description:
          'Orders and their changes for the reseller’s own shop. Every route but this document needs `Authorization: Bearer <token>` with the scope it names (docs/api.md).',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
    // Shared schemas keep their names (Order, Product, Event, Error …) in the document.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });
  app.addSchema(publicOrderSchema);
  app.addSchema(productSchema);
  app.addSchema(priceChangeSchema);
  app.addSchema(categorySchema);
  app.addSchema(balanceSchema);
  app.addSchema(feedEventSchema);
  app.addSchema(errorSchema);

  app.addHook('onRequest', async (request) => {
    const scope = request.routeOptions.config.scope;
    if (!scope) return;
    request.token = await authenticate(request, scope);
  });

  app.addHook('preValidation', async (request) => {
    const problem = requestTextProblem(request);
    if (problem) throw new ApiHttpError('VALIDATION_ERROR', problem);
  });

  async function authenticate(request: FastifyRequest, scope: ApiScope): Promise<ApiToken> {
    const header = request.headers.authorization;
    const bearer = header?.startsWith('Bearer ') ? header.slice(7).trim() : undefined;
    if (!bearer) {
      throw new ApiHttpError('TOKEN_MISSING', `send Authorization: Bearer <token>; ${CREATE_TOKEN_HINT}`);
    }
    const result = await store.tokens.authenticate(bearer);
    if (!result.ok) {
      throw result.refusal === 'revoked'
        ? new ApiHttpError('TOKEN_REVOKED', `this token was revoked; ${CREATE_TOKEN_HINT}`)
        : new ApiHttpError('TOKEN_INVALID', `the token is not one of this h2h-sync; ${CREATE_TOKEN_HINT}`);
    }
    if (!result.token.scopes.includes(scope)) {
      throw new ApiHttpError(
        'SCOPE_MISSING',
        `token ${result.token.id} (${result.token.name}) lacks the scope ${scope}: create a token with --scope ${scope}`,
      );
    }
    return result.token;
  }

  app.setErrorHandler((error: FastifyError | ApiHttpError, request, reply) => {
    if (error instanceof ApiHttpError) {
      const status = API_ERRORS[error.code];
      if (status === 401) reply.header('www-authenticate', 'Bearer realm="h2h-sync"');
      return reply.code(status).send(errorBody(error.code, error.message));
    }
    if (error.validation) {
      return reply.code(400).send(errorBody('VALIDATION_ERROR', `${error.message}; see /openapi.json`));
    }
    const status = error.statusCode ?? 500;
    if (status === 413) return reply.code(413).send(errorBody('PAYLOAD_TOO_LARGE', 'the body is too large'));
    if (status === 415) {
      return reply
        .code(415)
        .send(errorBody('UNSUPPORTED_MEDIA_TYPE', 'send the body as Content-Type: application/json'));
    }
    if (status >= 400 && status < 500) return reply.code(400).send(errorBody('BAD_REQUEST', error.message));
    request.log.error({ reqId: request.id, err: error }, 'api failure');
    return reply
      .code(500)
      .send(errorBody('INTERNAL_ERROR', 'the API failed; retry, and report it if it persists'));
  });

  app.setNotFoundHandler(async (request) => {
    throw new ApiHttpError(
      'NOT_FOUND',
      `no route ${request.method} ${request.url.split('?')[0]}; see /openapi.json`,
    );
  });

  const errors = { 400: { $ref: 'Error#' }, 401: { $ref: 'Error#' }, 403: { $ref: 'Error#' } };
  const time = { type: 'string', format: 'date-time' } as const;
  const nullable = (schema: Record<string, unknown>, description: string) => ({
    ...schema,
    nullable: true,
    description,
  });
  const syncedAt = async () => {
    const at = await store.catalog.syncedAt();
    return at === null ? null : new Date(at).toISOString();
  };
  const { submissionBacklog, retryAfterS } = options;

  /** The order a route names, by partner_ref or invoice number, or the 404 that says so. */
  async function mustFindOrder(ref: string): Promise<PublicOrder> {
    const order = await store.queries.getPublicOrder(ref);
    if (!order)
      throw new ApiHttpError('ORDER_NOT_FOUND', `no order has partner_ref or invoice number ${ref}`);
    return order;
  }

  app.post<{ Body: PlaceOrderBody }>(
    '/v1/orders',
    {
      config: { scope: 'orders:write' },
      preValidation: async (request) => refuseNonStringData(request.body),
      schema: {
        summary: 'Place an order: accepted at once, submitted in arrival order as the upstream budget allows',
        headers: {
          type: 'object',
          properties: {
            'idempotency-key': {
              type: 'string',
              minLength: 1,
              description:
                'The partner_ref, for clients that send idempotency keys as a header: used when the body has no partner_ref; with one, both must be equal.',
            },
          },
        },
        body: {
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
              description:
                'The target, e.g. {"user_id": "12345678", "server_id": "2001"}; every value a string.',
            },
            partner_ref: {
              type: 'string',
              minLength: 1,
              description:
                'Your idempotency key (at most 64 characters): the same ref and body answer the same order, whatever its state. Generated when absent (and no Idempotency-Key is sent).',
            },
          },
        },
        response: {
          200: { $ref: 'Order#' },
          202: { $ref: 'Order#' },
          409: { $ref: 'Error#' },
          422: { $ref: 'Error#' },
          503: { $ref: 'Error#' },
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const { body } = request;
      const partnerRef = partnerRefOf(body, request.headers['idempotency-key']);
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
          { submissionBacklog, retryAfterS },
        );
      } catch (error) {
        if (!(error instanceof AcceptOrderError)) throw error;
        if (error.code === 'BACKLOG_FULL') reply.header('retry-after', String(retryAfterS));
        throw new ApiHttpError(error.code, error.message);
      }
      if (accepted.replayed) {
        reply.header('idempotent-replayed', 'true');
        return reply.code(200).send(accepted.order);
      }
      request.log.info({ partnerRef, token: request.token?.id }, 'order queued');
      return reply.code(202).send(accepted.order);
    },
  );

  app.post<{ Params: { ref: string } }>(
    '/v1/orders/:ref/cancel',
    {
      config: { scope: 'orders:write' },
      schema: {
        summary:
          'Cancel an order that was never sent: it becomes cancelled and is never sent; one already sent answers 409',
        params: { type: 'object', required: ['ref'], properties: { ref: { type: 'string', minLength: 1 } } },
        response: {
          200: { $ref: 'Order#' },
          404: { $ref: 'Error#' },
          409: { $ref: 'Error#' },
          ...errors,
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

  app.post<{ Params: { ref: string } }>(
    '/v1/orders/:ref/refresh',
    {
      config: { scope: 'orders:write' },
      schema: {
        summary:
          'Ask for an early poll of an order: its status is read from the upstream as soon as the budget allows',
        params: { type: 'object', required: ['ref'], properties: { ref: { type: 'string', minLength: 1 } } },
        response: {
          202: {
            type: 'object',
            required: ['requested', 'order'],
            properties: { requested: { type: 'boolean' }, order: { $ref: 'Order#' } },
          },
          404: { $ref: 'Error#' },
          409: { $ref: 'Error#' },
          503: { $ref: 'Error#' },
          ...errors,
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
      if (!options.requestPoll) {
        throw new ApiHttpError(
          'QUEUE_UNAVAILABLE',
          'early polls are not available here: the API has no Redis',
        );
      }
      try {
        await options.requestPoll(order.partner_ref);
      } catch (err) {
        request.log.error({ err, partnerRef: order.partner_ref }, 'early poll not requested');
        throw new ApiHttpError(
          'QUEUE_UNAVAILABLE',
          'the poll request could not be queued (Redis); retry later',
        );
      }
      // The answer lands in the order and the change feed; read either.
      return reply.code(202).send({ requested: true, order });
    },
  );

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  app.get<{ Params: { ref: string } }>(
    '/v1/orders/:ref',
    {
      config: { scope: 'orders:read' },
      schema: {
        summary: 'One order, by partner_ref or invoice number',
        params: { type: 'object', required: ['ref'], properties: { ref: { type: 'string', minLength: 1 } } },
        response: { 200: { $ref: 'Order#' }, 404: { $ref: 'Error#' }, ...errors },
      },
    },
    async (request) => mustFindOrder(request.params.ref),
  );

  app.get<{
    Querystring: {
      status?: string;
      created_from?: string;
      created_to?: string;
      limit: number;
      cursor?: string;
    };
  }>(
    '/v1/orders',
    {
      config: { scope: 'orders:read' },
      schema: {
        summary: 'Orders, newest first, a page at a time',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            status: {
              type: 'string',
              minLength: 1,
              description:
                'A status (SUCCESS …), a submission state (blocked …) or a status string of the upstream.',
            },
            created_from: { type: 'string', description: 'Written here at or after this ISO 8601 time.' },
            created_to: { type: 'string', description: 'Written here before this ISO 8601 time.' },
            limit: { type: 'integer', minimum: 1, maximum: ORDER_PAGE.max, default: ORDER_PAGE.default },
            cursor: { type: 'string', description: 'next_cursor of the previous page.' },
          },
        },
        response: {
          200: {
            type: 'object',
            required: ['data', 'next_cursor'],
            properties: {
              data: { type: 'array', items: { $ref: 'Order#' } },
              next_cursor: { type: 'string', nullable: true, description: 'null on the last page.' },
            },
          },
          ...errors,
        },
      },
    },
    async (request) => {
      const q = request.query;
      const page = await store.queries.pageOrders({
        limit: q.limit,
        ...(q.status === undefined ? {} : { status: q.status }),
        ...(q.created_from === undefined ? {} : { createdFrom: parseTime('created_from', q.created_from)! }),
        ...(q.created_to === undefined ? {} : { createdTo: parseTime('created_to', q.created_to)! }),
        ...(q.cursor === undefined ? {} : { beforeId: decodeCursor(q.cursor) }),
      });
      const more = page.length > q.limit;
      const rows = more ? page.slice(0, q.limit) : page;
      return { data: rows.map((r) => r.order), next_cursor: more ? encodeCursor(rows.at(-1)!.id) : null };
    },
  );

  app.get(
    '/v1/categories',
    {
      config: { scope: 'orders:read' },
      schema: {
        summary: 'The categories of the local catalog (no upstream call), with when it was synced',
        response: {
          200: {
            type: 'object',
            required: ['data', 'synced_at'],
            properties: {
              data: { type: 'array', items: { $ref: 'Category#' } },
              synced_at: nullable(time, 'null: never synced; run h2h-sync catalog sync.'),
            },
          },
          ...errors,
        },
      },
    },
    async () => ({ data: await store.catalog.categories(), synced_at: await syncedAt() }),
  );

  app.get<{ Querystring: { category_code?: string } }>(
    '/v1/products',
    {
      config: { scope: 'orders:read' },
      schema: {
        summary: 'The products of the local catalog with this account’s prices (no upstream call)',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { category_code: { type: 'string', minLength: 1, description: 'Only this category.' } },
        },
        response: {
          200: {
            type: 'object',
            required: ['data', 'synced_at'],
            properties: {
              data: { type: 'array', items: { $ref: 'Product#' } },
              synced_at: nullable(time, 'null: never synced; run h2h-sync catalog sync.'),
            },
          },
          ...errors,
        },
      },
    },
    async (request) => ({
      data: await store.catalog.products(request.query.category_code),
      synced_at: await syncedAt(),
    }),
  );

  app.get(
    '/v1/balance',
    {
      config: { scope: 'orders:read' },
      schema: {
        summary: 'The balance: the last profile read, corrected by the orders seen since (no upstream call)',
        response: { 200: { $ref: 'Balance#' }, ...errors },
      },
    },
    async () => store.balance.view(),
  );

  app.get<{ Querystring: { after: number; limit: number } }>(
    '/v1/events',
    {
      config: { scope: 'orders:read' },
      schema: {
        summary:
          'The change feed: every change of every order, price change and low balance, oldest first, after a cursor',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            after: {
              type: 'integer',
              minimum: 0,
              maximum: MAX_FEED_SEQ,
              default: 0,
              description: 'The last seq you handled; 0: from the oldest kept. At most 2^53 − 1.',
            },
            limit: { type: 'integer', minimum: 1, maximum: MAX_FEED_PAGE, default: 100 },
          },
        },
        response: {
          200: {
            type: 'object',
            required: ['data', 'next_after', 'has_more'],
            properties: {
              data: { type: 'array', items: { $ref: 'Event#' } },
              next_after: {
                type: 'integer',
                description: 'Pass as after to read on (unchanged when data is empty).',
              },
              has_more: { type: 'boolean' },
            },
          },
          ...errors,
        },
      },
    },
    async (request) => {
      const { after, limit } = request.query;
      const data = await store.feed.after(after, limit);
      const nextAfter = data.at(-1)?.seq ?? after;
      return { data, next_after: nextAfter, has_more: (await store.feed.lastSeq()) > nextAfter };
    },
  );

  return app;
}
