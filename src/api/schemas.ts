import { ORDER_OUTCOMES } from '../domain/public-order.js';
import { FEED_EVENT_TYPES } from '../store/feed.js';
import { SUBMISSION_STATES } from '../store/local-order.js';
import { ORDER_STATUSES } from '../upstream/model.js';
import { API_ERRORS, type ApiErrorCode } from './errors.js';

/**
 * The JSON Schemas of the shop API (docs/api.md): Fastify validates requests and serialises
 * answers with them, and @fastify/swagger builds the OpenAPI document from them. The order's
 * schema mirrors `PublicOrder` (src/domain/public-order.ts) field for field: an answer
 * serialiser drops any field a schema does not name, and the API test compares the two.
 */

const nullable = (schema: Record<string, unknown>) => ({ ...schema, nullable: true });
const text = { type: 'string' } as const;
const time = { type: 'string', format: 'date-time' } as const;
const refusal = nullable({
  type: 'object',
  required: ['code', 'detail'],
  properties: { code: text, detail: text },
});

export const publicOrderSchema = {
  $id: 'Order',
  type: 'object',
  description: 'An order as h2h-sync knows it (docs/api.md, "The order").',
  required: [
    'partner_ref',
    'upstream',
    'attempts',
    'invoice_number',
    'product_code',
    'product_id',
    'product_name',
    'data',
    'target',
    'nickname',
    'amount',
    'status',
    'upstream_status',
    'serial_number',
    'message',
    'submission',
    'rejection',
    'blocked',
    'cancellation',
    'outcome',
    'created_at',
    'success_at',
    'local_created_at',
    'updated_at',
    'final_at',
    'version',
  ],
  properties: {
    partner_ref: {
      ...text,
      description:
        'The shop’s idempotency key: the order’s name, whatever its attempts (sent upstream unchanged on the first).',
    },
    upstream: { ...text, description: 'The upstream of the current (latest) attempt (docs/upstreams.md).' },
    attempts: {
      type: 'array',
      description:
        'Each placement of the order on an upstream, oldest first, the current one last (docs/upstreams.md, "What the shop sees").',
      items: {
        type: 'object',
        required: [
          'attempt',
          'upstream',
          'partner_ref',
          'invoice_number',
          'status',
          'submission',
          'chosen',
          'ended',
        ],
        properties: {
          attempt: { type: 'integer', minimum: 1 },
          upstream: text,
          partner_ref: {
            ...text,
            description: 'The ref the upstream knows this attempt by: `<shop ref>~<n>` from the second.',
          },
          invoice_number: nullable(text),
          status: nullable({ type: 'string', enum: [...ORDER_STATUSES, null] }),
          submission: { type: 'string', enum: [...SUBMISSION_STATES] },
          chosen: nullable({
            ...text,
            description: 'Why this upstream was chosen, when the order was routed.',
          }),
          ended: nullable({
            ...refusal,
            description:
              'Why the attempt ended (INSUFFICIENT_BALANCE, INVALID_PRODUCT, FAILED); null for the current one.',
          }),
        },
      },
    },
    invoice_number: nullable(text),
    product_code: nullable(text),
    product_id: nullable(text),
    product_name: nullable(text),
    data: nullable({
      type: 'object',
      additionalProperties: { type: 'string' },
      description: 'The target data sent with the create call.',
    }),
    target: nullable(text),
    nickname: nullable(text),
    amount: nullable({ type: 'number' }),
    status: nullable({ type: 'string', enum: [...ORDER_STATUSES, null] }),
    upstream_status: nullable(text),
    serial_number: nullable(text),
    message: nullable(text),
    submission: { type: 'string', enum: [...SUBMISSION_STATES] },
    rejection: refusal,
    blocked: refusal,
    cancellation: refusal,
    outcome: nullable({
      type: 'string',
      enum: [...ORDER_OUTCOMES, null],
      description:
        'null while the order is open; else how it ended. delivered can still become refunded (docs/api.md, "The order").',
    }),
    created_at: nullable(text),
    success_at: nullable(text),
    local_created_at: time,
    updated_at: time,
    final_at: nullable(time),
    version: { type: 'integer', minimum: 0 },
  },
} as const;

const productProperties = {
  id: text,
  code: text,
  name: text,
  category_code: text,
  price: { type: 'number', description: 'This account’s price.' },
  is_active: { type: 'boolean' },
  target: nullable({
    type: 'object',
    additionalProperties: { type: 'string' },
    description:
      'What an order’s data must hold: data key → regular expression. null when the upstream does not publish it.',
  }),
} as const;
const productRequired = ['id', 'code', 'name', 'category_code', 'price', 'is_active', 'target'] as const;

const upstreamName = {
  type: 'string',
  description: 'The upstream’s name (docs/upstreams.md); `default` with one upstream.',
} as const;

export const candidateSchema = {
  $id: 'Candidate',
  type: 'object',
  description: 'One upstream’s offer of a product (docs/api.md, "Catalog and balance").',
  required: ['upstream', 'product_code', 'price', 'available'],
  properties: {
    upstream: upstreamName,
    product_code: {
      type: 'string',
      description: 'The upstream’s own code: the product’s, unless the product map links another.',
    },
    price: { type: 'number', description: 'This account’s price on that upstream.' },
    available: {
      type: 'boolean',
      description: 'Whether that upstream’s last catalog sync listed it as active.',
    },
  },
} as const;

export const productSchema = {
  $id: 'Product',
  type: 'object',
  description:
    'A product the shop orders by its code, as the upstreams’ last catalog syncs read it (docs/api.md, "Catalog and balance"): id, name, category_code, price and target are the cheapest available candidate’s (else the cheapest’s), is_active whether any candidate is available.',
  required: [...productRequired, 'candidates'],
  properties: {
    ...productProperties,
    candidates: {
      type: 'array',
      items: { $ref: 'Candidate#' },
      description: 'Every upstream’s offer, cheapest first.',
    },
  },
} as const;

export const priceChangeSchema = {
  $id: 'ProductPriceChange',
  type: 'object',
  description:
    'The data of product.price_changed: one upstream’s product after its sync, and its price before.',
  required: [...productRequired, 'upstream', 'previous_price'],
  properties: { ...productProperties, upstream: upstreamName, previous_price: { type: 'number' } },
} as const;

export const categorySchema = {
  $id: 'Category',
  type: 'object',
  required: ['code', 'name', 'sub_name', 'logo', 'is_active'],
  properties: { code: text, name: text, sub_name: text, logo: text, is_active: { type: 'boolean' } },
} as const;

const balanceRequired = [
  'balance',
  'profile_balance',
  'profile_read_at',
  'debited',
  'credited',
  'unpriced_orders',
  'low_threshold',
] as const;
const balanceProperties = {
  balance: nullable({ type: 'number', description: 'profile_balance - debited + credited.' }),
  profile_balance: nullable({ type: 'number' }),
  profile_read_at: nullable(time),
  debited: { type: 'number' },
  credited: { type: 'number' },
  unpriced_orders: { type: 'integer', minimum: 0 },
  low_threshold: nullable({ type: 'number' }),
} as const;

export const upstreamBalanceSchema = {
  $id: 'UpstreamBalance',
  type: 'object',
  description:
    'One upstream’s last profile balance, corrected by its orders seen since (docs/api.md, "Balance"); also the data of balance.low.',
  required: [...balanceRequired, 'upstream'],
  properties: { ...balanceProperties, upstream: upstreamName },
} as const;

export const balanceSchema = {
  $id: 'Balance',
  type: 'object',
  description:
    'The balance over every upstream: the sums of their figures (profile_read_at the oldest read), and each upstream’s (docs/api.md, "Balance").',
  required: [...balanceRequired, 'upstreams'],
  properties: {
    ...balanceProperties,
    profile_read_at: nullable({ ...time, description: 'The oldest of the upstreams’ profile reads.' }),
    upstreams: {
      type: 'array',
      items: { $ref: 'UpstreamBalance#' },
      description: 'Each upstream whose profile was read, the default first, then by name.',
    },
  },
} as const;

export const balanceDriftSchema = {
  $id: 'BalanceDrift',
  type: 'object',
  description:
    'One upstream’s last profile balance against the balance h2h-sync expected (docs/api.md, "Balance drift"); the data of balance.drift.',
  required: [
    'upstream',
    'profile_balance',
    'expected_balance',
    'drift',
    'unexplained_drift',
    'in_doubt',
    'read_at',
    'drift_since',
    'threshold',
    'audit_steered',
  ],
  properties: {
    upstream: upstreamName,
    profile_balance: { type: 'number' },
    expected_balance: {
      type: 'number',
      description: 'The previous expected balance plus what h2h-sync accounted since.',
    },
    drift: {
      type: 'number',
      description:
        'profile_balance - expected_balance: above 0 money came back unlearnt, below 0 a debit unlearnt.',
    },
    unexplained_drift: {
      type: 'number',
      description: 'The drift less what the creates in doubt explain (a negative drift up to their prices).',
    },
    in_doubt: {
      type: 'number',
      description: 'The prices of the orders whose create was in doubt at the read.',
    },
    read_at: time,
    drift_since: nullable({ ...time, description: 'When the drift episode began; null when none.' }),
    threshold: nullable({ type: 'number', description: 'BALANCE_DRIFT_THRESHOLD; null when off.' }),
    audit_steered: {
      type: 'boolean',
      description: 'Whether the audit reads the upstream’s most recent SUCCESS orders first to explain it.',
    },
  },
} as const;

export const feedEventSchema = {
  $id: 'Event',
  type: 'object',
  description:
    'One change: of an order (order.*: data is the Order), a product price (ProductPriceChange), an upstream’s low balance (UpstreamBalance) or its balance drift (BalanceDrift). docs/api.md, "The change feed".',
  required: ['seq', 'type', 'timestamp', 'data'],
  properties: {
    seq: { type: 'integer', minimum: 1, description: 'The cursor: read on with after=seq.' },
    type: { type: 'string', enum: [...FEED_EVENT_TYPES] },
    timestamp: time,
    previous_status: nullable({
      type: 'string',
      enum: [...ORDER_STATUSES, null],
      description:
        'order.* only: the order’s status before this change (null when it had none, and in events recorded before h2h-sync kept it). Absent from the other types.',
    }),
    data: {
      anyOf: [
        { $ref: 'Order#' },
        { $ref: 'ProductPriceChange#' },
        { $ref: 'UpstreamBalance#' },
        { $ref: 'BalanceDrift#' },
      ],
    },
  },
} as const;

export const errorSchema = {
  $id: 'Error',
  type: 'object',
  description: 'Every error answer (docs/api.md, "Errors"); each answer lists the codes it may carry.',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: {
          type: 'string',
          enum: Object.keys(API_ERRORS) as ApiErrorCode[],
          description: 'Stable, for programs: docs/api.md lists every one.',
        },
        message: { ...text, description: 'For people: what was wrong and how to fix it.' },
      },
    },
  },
} as const;

/**
 * The headers an answer of the API may carry beside the rate limit's (rate-limit.ts), as the
 * OpenAPI document's `components.headers`; an answer names them with {@link answerHeaders}.
 * `required`: sent on every answer that names it.
 */
export const RESPONSE_HEADERS = {
  'Idempotent-Replayed': {
    description:
      'true: this answers a repeat of an order placed before with the same partner_ref and body; nothing new was placed (docs/api.md, "Placing orders").',
    required: true,
    schema: { type: 'string', enum: ['true'] },
  },
  'Retry-After': {
    description: 'Seconds to wait before the next request.',
    required: true,
    schema: { type: 'integer', minimum: 0 },
  },
  'WWW-Authenticate': {
    description: 'The scheme to authenticate with: `Bearer realm="h2h-sync"`.',
    required: true,
    schema: { type: 'string', pattern: '^Bearer ' },
  },
} as const;
export type ResponseHeaderName = keyof typeof RESPONSE_HEADERS;

/** The `headers` of an answer's schema, as @fastify/swagger reads them; the document refers each to its component. */
export const answerHeaders = (...names: ResponseHeaderName[]) =>
  Object.fromEntries(
    names.map((name) => [
      name,
      { description: RESPONSE_HEADERS[name].description, ...RESPONSE_HEADERS[name].schema },
    ]),
  );

/** What each error code an operation may answer means there (docs/api.md, "Errors"). */
export type ErrorMeanings = Partial<Record<ApiErrorCode, string>>;

/** The refusals any operation may give: its parameters, its URL, our failure. */
export const REQUEST_REFUSALS = {
  VALIDATION_ERROR:
    'a parameter its schema refuses, or a control character or lone surrogate in any text of the request (docs/api.md, "What refs and data may contain")',
  BAD_REQUEST: 'a malformed URL',
  INTERNAL_ERROR: 'a failure of ours (logged); retry, and report it if it persists',
  STORE_UNAVAILABLE:
    'the order store is busy or failing over (PostgreSQL: no writable server yet); retry after `Retry-After` seconds',
} as const satisfies ErrorMeanings;

/** The refusals of an operation's token (auth.ts): never counted against the rate limit. */
export const TOKEN_REFUSALS = {
  TOKEN_MISSING: 'no `Authorization: Bearer <token>`',
  TOKEN_INVALID: 'a token this h2h-sync does not know',
  TOKEN_REVOKED: 'a revoked token',
  SCOPE_MISSING: 'the token lacks the scope this operation needs',
} as const satisfies ErrorMeanings;

/** The refusals of a request body (shared/request-errors.ts): any POST. */
export const BODY_REFUSALS = {
  INVALID_JSON: 'a body sent as application/json that does not parse, or has a `__proto__` key',
  PAYLOAD_TOO_LARGE: 'a body over 1 MiB',
  UNSUPPORTED_MEDIA_TYPE: 'a body in any content type but application/json',
} as const satisfies ErrorMeanings;

/** The header each error code is sent with (errors.ts: 401s, a store failing over; routes/orders.ts: a full backlog, a refresh without Redis). */
const ERROR_HEADERS: Partial<Record<ApiErrorCode, ResponseHeaderName>> = {
  TOKEN_MISSING: 'WWW-Authenticate',
  TOKEN_INVALID: 'WWW-Authenticate',
  TOKEN_REVOKED: 'WWW-Authenticate',
  BACKLOG_FULL: 'Retry-After',
  QUEUE_UNAVAILABLE: 'Retry-After',
  STORE_UNAVAILABLE: 'Retry-After',
};

/**
 * The error answers of an operation, by status (API_ERRORS): each in the error shape, described
 * by the codes it may carry and what they mean there, with the header those codes are sent with.
 * Throws when codes of one status disagree on a header: the document could not say it is sent.
 */
export function errorAnswers(meanings: ErrorMeanings) {
  const byStatus = new Map<number, ApiErrorCode[]>();
  for (const code of Object.keys(meanings) as ApiErrorCode[]) {
    byStatus.set(API_ERRORS[code], [...(byStatus.get(API_ERRORS[code]) ?? []), code]);
  }
  return Object.fromEntries(
    [...byStatus].map(([status, codes]) => {
      const headers = new Set(codes.map((code) => ERROR_HEADERS[code]));
      if (headers.size > 1) {
        throw new Error(`error codes ${codes.join(', ')} share status ${status} but not a header`);
      }
      const [header] = headers;
      const answer = {
        $ref: 'Error#',
        description: codes.map((code) => `\`${code}\`: ${meanings[code]}.`).join('\n'),
        ...(header ? { headers: answerHeaders(header) } : {}),
      };
      return [status, answer];
    }),
  );
}
