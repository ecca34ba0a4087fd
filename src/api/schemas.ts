import { ORDER_OUTCOMES } from '../domain/public-order.js';
import { FEED_EVENT_TYPES } from '../store/feed.js';
import { SUBMISSION_STATES } from '../store/local-order.js';
import { ORDER_STATUSES } from '../upstream/model.js';

/**
 * The JSON Schemas of the shop API (docs/api.md): Fastify validates requests and serialises
 * answers with them, and @fastify/swagger builds the OpenAPI document from them. The order's
 * schema mirrors `PublicOrder` (src/orders/public-order.ts) field for field: an answer
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
    partner_ref: { ...text, description: 'The idempotency key sent upstream; the order’s name.' },
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

export const productSchema = {
  $id: 'Product',
  type: 'object',
  description: 'A product as the last catalog sync read it (docs/api.md, "Catalog and balance").',
  required: [...productRequired],
  properties: productProperties,
} as const;

export const priceChangeSchema = {
  $id: 'ProductPriceChange',
  type: 'object',
  description: 'The data of product.price_changed: the product after the sync, and its price before.',
  required: [...productRequired, 'previous_price'],
  properties: { ...productProperties, previous_price: { type: 'number' } },
} as const;

export const categorySchema = {
  $id: 'Category',
  type: 'object',
  required: ['code', 'name', 'sub_name', 'logo', 'is_active'],
  properties: { code: text, name: text, sub_name: text, logo: text, is_active: { type: 'boolean' } },
} as const;

export const balanceSchema = {
  $id: 'Balance',
  type: 'object',
  description:
    'The last profile balance, corrected by the orders seen since (docs/api.md, "Balance"); also the data of balance.low.',
  required: [
    'balance',
    'profile_balance',
    'profile_read_at',
    'debited',
    'credited',
    'unpriced_orders',
    'low_threshold',
  ],
  properties: {
    balance: nullable({ type: 'number', description: 'profile_balance - debited + credited.' }),
    profile_balance: nullable({ type: 'number' }),
    profile_read_at: nullable(time),
    debited: { type: 'number' },
    credited: { type: 'number' },
    unpriced_orders: { type: 'integer', minimum: 0 },
    low_threshold: nullable({ type: 'number' }),
  },
} as const;

export const feedEventSchema = {
  $id: 'Event',
  type: 'object',
  description:
    'One change: of an order (order.*: data is the Order), a product price (ProductPriceChange) or a low balance (Balance). docs/api.md, "The change feed".',
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
    data: { anyOf: [{ $ref: 'Order#' }, { $ref: 'ProductPriceChange#' }, { $ref: 'Balance#' }] },
  },
} as const;

export const errorSchema = {
  $id: 'Error',
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { ...text, description: 'Stable, for programs: docs/api.md lists every one.' },
        message: { ...text, description: 'For people: what was wrong and how to fix it.' },
      },
    },
  },
} as const;

/** The error answers every route with a token may give. */
export const errorResponses = {
  400: { $ref: 'Error#' },
  401: { $ref: 'Error#' },
  403: { $ref: 'Error#' },
} as const;
