/**
 * The errors of the upstream client. Two kinds, because they mean different things to a caller:
 *
 * - {@link UpstreamError}: the upstream (or a proxy in front of it) answered with an error status.
 *   The outcome is known: the request was refused, and `code` says why.
 * - {@link UpstreamUnreachableError}: no answer arrived (network failure or timeout). The outcome
 *   is unknown, not failed: an order may exist upstream (spec §4 POST /orders rule 7).
 */
import { UPSTREAM_ERRORS, type UpstreamErrorCode } from './model.js';

/** Codes the client itself gives to answers that carry no usable upstream code. */
export const CLIENT_ERROR_FIXES = {
  SERVICE_UNAVAILABLE: 'the upstream is unavailable for now; retry later',
  BAD_GATEWAY: 'the upstream or a proxy in front of it failed; retry later',
  GATEWAY_TIMEOUT: 'the upstream or a proxy in front of it timed out; read the order before repeating',
  INVALID_RESPONSE: 'the upstream answered a body the client cannot read; report it to the provider',
} as const;

function isKnownCode(code: string): code is UpstreamErrorCode {
  return Object.hasOwn(UPSTREAM_ERRORS, code);
}

/** The sender IP in an IP_NOT_WHITELISTED detail (spec §5 rule 4), whether bare or inside a sentence. */
function senderIp(detail: string): string | undefined {
  const match =
    /\d{1,3}(?:\.\d{1,3}){3}|(?:[0-9a-f]{0,4}:){2,7}(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-f]{1,4})?/i.exec(detail);
  return match?.[0];
}

/** What the caller should do about `code` at `status`, for codes in no table as well. */
export function fixFor(code: string, status: number, detail: string): string {
  if (code === 'IP_NOT_WHITELISTED') {
    const ip = senderIp(detail);
    return ip ? `add ${ip} to the member's whitelist` : "add this server's IP to the member's whitelist";
  }
  if (isKnownCode(code)) return UPSTREAM_ERRORS[code].fix;
  if (Object.hasOwn(CLIENT_ERROR_FIXES, code))
    return CLIENT_ERROR_FIXES[code as keyof typeof CLIENT_ERROR_FIXES];
  if (status === 404) return UPSTREAM_ERRORS.ORDER_NOT_FOUND.fix;
  if (status === 429) return UPSTREAM_ERRORS.TOO_MANY_REQUESTS.fix;
  if (status >= 500) return 'the upstream failed; retry later';
  if (status === 401 || status === 403) return 'check the API key, the whitelist and H2H access';
  return 'fix the request; the detail names the problem';
}

/**
 * What a refusal says about our own configuration rather than about the request (decisions.md,
 * "Errors on create: rejection or configuration"):
 * - `credentials`: 401 or 403 (API_KEY_MISSING, INVALID_API_KEY, IP_NOT_WHITELISTED): the API key,
 *   the account's H2H access or the member's IP whitelist;
 * - `base_url`: a 404 of a route that always exists (every route but `GET /orders/:ref`, whose
 *   404 means "no such order"): H2H_BASE_URL points at something that is not the member API.
 */
export type ConfigurationProblem = 'credentials' | 'base_url';

/** Whether repeating the same request later can succeed: 429 and 5xx yes, other 4xx no (spec §7 rule 1). */
export function isRetryableStatus(status: number): boolean {
  return status === 429 || status >= 500;
}

/** Fields of an {@link UpstreamError}. */
export interface UpstreamErrorInit {
  /** HTTP status of the answer. */
  status: number;
  /** The upstream's `message` field, or a client code such as `BAD_GATEWAY` when the body had none. */
  code: string;
  /** The upstream's `error` field (for IP_NOT_WHITELISTED the sender IP), or the start of a non-JSON body. */
  detail: string;
  /** HTTP method and path of the request, for the message. */
  method: string;
  path: string;
  /** How many attempts were made before this answer was given up on. */
  attempts: number;
  /**
   * For a 429: when to try again, in ms. Its `Retry-After` when the upstream sent one, else when
   * the upstream's rolling window can have room (the client's reckoning, see `UpstreamClientOptions.rateWindowMs`).
   */
  retryAfterMs?: number;
  /** True when an answer of this status does not prove the request had no effect (a 5xx to POST /orders). */
  outcomeUnknown?: boolean;
  /**
   * True when a 404 of this route is an answer ("no such order": `GET /orders/:ref`); on any other
   * route a 404 means the base URL is wrong. Default: false.
   */
  notFoundIsAnswer?: boolean;
}

function configurationProblem(init: UpstreamErrorInit): ConfigurationProblem | undefined {
  if (init.status === 401 || init.status === 403) return 'credentials';
  if (init.status === 404 && !init.notFoundIsAnswer) return 'base_url';
  return undefined;
}

/**
 * The upstream answered with an error. `code` is the upstream's `message` field (spec §7): act on
 * it, for example `INSUFFICIENT_BALANCE` means top up and create a new order.
 */
export class UpstreamError extends Error {
  override name = 'UpstreamError';
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  /** Whether a later retry of the same request can help (429 and 5xx); 400, 401 and 404 never. */
  readonly retryable: boolean;
  /** What to do about it. */
  readonly fix: string;
  readonly method: string;
  readonly path: string;
  readonly attempts: number;
  /** For a 429: when to try again, in ms ({@link UpstreamErrorInit.retryAfterMs}). */
  readonly retryAfterMs: number | undefined;
  /**
   * True for a 5xx answer to order creation: the upstream may have created the order before it
   * failed, so treat the submission as unknown and read the order (or repeat with the same partner_ref).
   */
  readonly outcomeUnknown: boolean;
  /**
   * Set when the refusal is about our configuration, not the request: every call fails the same
   * way until it is fixed (see {@link ConfigurationProblem}). Undefined for other answers.
   */
  readonly configuration: ConfigurationProblem | undefined;

  constructor(init: UpstreamErrorInit) {
    const configuration = configurationProblem(init);
    const fix =
      configuration === 'base_url'
        ? `the upstream has no ${init.method} ${init.path}: check H2H_BASE_URL (the member API's base URL)`
        : fixFor(init.code, init.status, init.detail);
    const detail = init.detail ? ` (${init.detail})` : '';
    const tries = init.attempts > 1 ? ` after ${init.attempts} attempts` : '';
    super(`${init.method} ${init.path} failed with ${init.status} ${init.code}${detail}${tries}: ${fix}`);
    this.status = init.status;
    this.code = init.code;
    this.detail = init.detail;
    this.retryable = isRetryableStatus(init.status);
    this.fix = fix;
    this.method = init.method;
    this.path = init.path;
    this.attempts = init.attempts;
    this.retryAfterMs = init.retryAfterMs;
    this.outcomeUnknown = init.outcomeUnknown ?? false;
    this.configuration = configuration;
  }
}

/** Why no answer arrived. */
export type UnreachableCode = 'TIMEOUT' | 'NETWORK_ERROR';

/** Fields of an {@link UpstreamUnreachableError}. */
export interface UpstreamUnreachableErrorInit {
  code: UnreachableCode;
  method: string;
  path: string;
  attempts: number;
  /** The last network error (undici's, with its own code such as UND_ERR_HEADERS_TIMEOUT). */
  cause: unknown;
}

/**
 * No answer arrived from the upstream: a network failure or a timeout, on every attempt. The
 * outcome is unknown, not failed. For order creation, read the order by its partner_ref or repeat
 * the creation with the same partner_ref (spec §4 rule 7); never create it under a new reference.
 */
export class UpstreamUnreachableError extends Error {
  override name = 'UpstreamUnreachableError';
  readonly code: UnreachableCode;
  readonly outcomeUnknown = true as const;
  readonly retryable = true as const;
  readonly method: string;
  readonly path: string;
  readonly attempts: number;
  readonly fix: string;

  constructor(init: UpstreamUnreachableErrorInit) {
    const what = init.code === 'TIMEOUT' ? 'timed out' : 'failed on the network';
    const fix =
      init.method === 'POST'
        ? 'the order may exist: read it by its partner_ref, or repeat with the same partner_ref'
        : 'check the base URL and the network, then retry';
    const reason = init.cause instanceof Error ? ` (${init.cause.message})` : '';
    super(
      `${init.method} ${init.path} ${what} after ${init.attempts} attempt${init.attempts === 1 ? '' : 's'}${reason}; ` +
        `the outcome is unknown, not failed: ${fix}`,
      { cause: init.cause },
    );
    this.code = init.code;
    this.method = init.method;
    this.path = init.path;
    this.attempts = init.attempts;
    this.fix = fix;
  }
}

/** An order input the client refuses to send (checked before any upstream call or budget draw). */
export class OrderInputError extends Error {
  override name = 'OrderInputError';
  constructor(
    readonly code: 'PARTNER_REF_REQUIRED' | 'PARTNER_REF_TOO_LONG' | 'PRODUCT_REQUIRED',
    message: string,
  ) {
    super(message);
  }
}
