/**
 * The upstream H2H API's data model: the spec's resources (`shared/upstream-api.md` §2), the
 * order statuses and the error codes fixed in `shared/decisions.md` (the state machine over
 * these statuses is src/domain/state-machine.ts). The simulator, the client, the store and the
 * receiver all import these; nothing else defines them.
 */

/** Path prefix of every member endpoint (spec §1). */
export const API_PREFIX = '/v1/member-api';

/** GET /profile (spec §2). */
export interface Profile {
  member_id: string;
  member_name: string;
  member_role: string;
  member_balance: number;
}

/** An entry of GET /categories (spec §2). */
export interface Category {
  name: string;
  code: string;
  sub_name: string;
  logo: string;
  /**
   * Shown by the spec; an upstream that omits it lists the category as active: only an explicit
   * `false` makes it inactive (docs/api.md, "Catalog and balance").
   */
  is_active?: boolean;
}

/** An entry of GET /products (decisions.md: "Order responses"); `price` is already the caller's. */
export interface Product {
  id: string;
  code: string;
  name: string;
  category_code: string;
  price: number;
  /**
   * decisions.md's, not the spec's (which shows no product field beyond code, id and price): an
   * upstream that omits it lists the product as active. Only an explicit `false` makes it
   * inactive (docs/api.md, "Catalog and balance").
   */
  is_active?: boolean;
  /**
   * What the order's `data` must hold: each key with the regular expression its value must
   * match. Not in the upstream's contract (decisions.md lists no such field): the simulator
   * publishes it as an extension, from its fixture; absent from an upstream that does not.
   */
  target?: ProductTarget;
}

/** A product's target format: data key → regular expression (simulator extension, see {@link Product.target}). */
export type ProductTarget = Record<string, string>;

/** Every status of decisions.md, in the order an order normally moves through them. */
export const ORDER_STATUSES = ['PENDING', 'PROCESSING', 'SUCCESS', 'FAILED', 'REFUNDED'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

/** The order object of POST /orders and GET /orders/:ref (spec §2 plus decisions.md's extra fields). */
export interface Order {
  invoice_number: string;
  partner_ref: string;
  /** Usually an {@link OrderStatus}; a string outside the table is kept as received. */
  status: string;
  amount: number;
  /** `user_id(server_id)`, or the user id alone for products without a server id. */
  target: string;
  product_name: string;
  product_code: string;
  serial_number: string | null;
  nickname: string | null;
  /** A short reason on FAILED/REFUNDED, otherwise null. */
  message: string | null;
  created_at: string;
  success_at: string | null;
}

/** Target data of an order: for a game top-up `{user_id, server_id}`; other products other keys. */
export type OrderData = Record<string, string>;

/** Body of POST /orders (spec §2, "Order input"). */
export interface OrderInput {
  product_code?: string;
  product_id?: string;
  /** The member's idempotency key, at most {@link PARTNER_REF_MAX_LENGTH} characters. */
  partner_ref?: string;
  data: OrderData;
  callback_url?: string;
}

/** The most characters (Unicode code points) a partner_ref may have (spec §2, §8). */
export const PARTNER_REF_MAX_LENGTH = 64;

/**
 * The upstream of `H2H_BASE_URL`, `H2H_API_KEY` and `H2H_API_SECRET`: every order's when no other
 * is configured (docs/upstreams.md).
 */
export const DEFAULT_UPSTREAM = 'default';

/**
 * Whether `name` is the default upstream's: {@link DEFAULT_UPSTREAM}, or absent (a job, option
 * or record written before there were several upstreams, or by code that names none, is the
 * default's).
 */
export function isDefaultUpstream(name?: string | null): boolean {
  return name === undefined || name === null || name === DEFAULT_UPSTREAM;
}

/** An upstream's name: it is in URLs, Redis keys and variable names (docs/upstreams.md). */
export const UPSTREAM_NAME_PATTERN = /^[a-z][a-z0-9-]{0,31}$/;
export const UPSTREAM_NAME_RULE = 'must be a-z, digits and -, starting with a letter, at most 32 characters';

/**
 * The one partner_ref rule, shared by order placement, the client, the store and the simulator:
 * a partner_ref is 1 to {@link PARTNER_REF_MAX_LENGTH} characters (spec §2: "at most 64
 * characters"). Returns what is wrong, as `partner_ref: …` (the simulator's VALIDATION_ERROR
 * names the field first), or undefined when the ref is valid.
 *
 * Characters are counted as Unicode code points, not UTF-16 units (`string.length`): the spec
 * speaks of characters, not bytes or code units, and JSON carries code points, so an emoji is one
 * character to the upstream as to a person. Counting UTF-16 units would refuse valid refs
 * (64 emoji are 128 units); counting bytes would refuse more still.
 */
export function partnerRefProblem(ref: string): string | undefined {
  if (ref === '') return 'partner_ref: must not be empty';
  // Counting code points walks the string; a UTF-16 length within the limit is always fine.
  if (ref.length <= PARTNER_REF_MAX_LENGTH) return undefined;
  const characters = [...ref].length;
  if (characters <= PARTNER_REF_MAX_LENGTH) return undefined;
  return `partner_ref: at most ${PARTNER_REF_MAX_LENGTH} characters (Unicode code points), got ${characters}`;
}
/** Spec §8 and decisions.md: requests per rolling minute per API key. */
export const DEFAULT_RATE_LIMIT_PER_MINUTE = 60;

/** Every error body of the upstream (spec §7). */
export interface ErrorBody {
  statusCode: number;
  /** The error code: the field to act on. */
  message: string;
  /** Detail; for IP_NOT_WHITELISTED the sender IP. */
  error: string;
}

/**
 * The upstream's error codes (the `message` field) with their HTTP status and what the caller
 * should do. Spec §7 plus the codes decisions.md fixes for the spec's gaps.
 */
export const UPSTREAM_ERRORS = {
  API_KEY_MISSING: {
    status: 401,
    fix: 'send the API key (H2H_API_KEY) in x-api-key or Authorization: Bearer (H2H_AUTH_STYLE)',
  },
  INVALID_API_KEY: {
    status: 401,
    fix: 'check the API key (H2H_API_KEY), and that H2H access and the account are active',
  },
  IP_NOT_WHITELISTED: { status: 401, fix: 'add the IP in the error detail to the member whitelist' },
  TOO_MANY_REQUESTS: {
    status: 429,
    fix: 'slow down: at most 60 requests per minute; retry after Retry-After',
  },
  INVALID_PRODUCT: { status: 400, fix: 'use an active product code or id that is enabled for the API' },
  INSUFFICIENT_BALANCE: { status: 400, fix: 'top up the balance, then create a new order' },
  INVALID_TARGET: { status: 400, fix: 'fix the target data field named in the detail' },
  VALIDATION_ERROR: { status: 400, fix: 'fix the request field named in the detail' },
  ORDER_NOT_FOUND: { status: 404, fix: 'check the partner_ref or invoice number' },
  INTERNAL_ERROR: { status: 500, fix: 'the upstream failed; retry later' },
} as const satisfies Record<string, { status: number; fix: string }>;
export type UpstreamErrorCode = keyof typeof UPSTREAM_ERRORS;

/** The reason phrase that goes into `error` when there is no more specific detail. */
export const HTTP_REASON: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  404: 'Not Found',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/** Builds an error body of the spec's shape for a known code. */
export function errorBody(code: UpstreamErrorCode, detail?: string): ErrorBody {
  const status = UPSTREAM_ERRORS[code].status;
  return { statusCode: status, message: code, error: detail ?? HTTP_REASON[status] ?? 'Error' };
}

// ---------------------------------------------------------------------------------------------
// Webhooks (decisions.md, "Webhooks").

/** The event type every webhook carries. */
export const ORDER_UPDATED_EVENT = 'order.updated';

/** Body of a webhook delivery. */
export interface WebhookEvent {
  event_id: string;
  event: typeof ORDER_UPDATED_EVENT;
  /** ISO 8601 UTC. */
  created_at: string;
  /** The order as GET /orders/:ref returned it at that moment. */
  data: Order;
}

/** Default header names of a webhook delivery; the receiver takes others as settings. */
export const WEBHOOK_HEADERS = {
  timestamp: 'x-timestamp',
  signature: 'x-signature',
  eventId: 'x-event-id',
  eventType: 'x-event-type',
} as const;
