import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { CLIENT_ERROR_STATUS, type ClientErrorKind } from '../shared/client-error.js';
import { type RequestErrorKind, requestErrorOf } from '../shared/request-errors.js';
import { StoreError } from '../store/store-error.js';

/**
 * Every error answer of the shop API: its HTTP status and what to do. The body is always
 * `{"error": {"code", "message"}}` (docs/api.md, "Errors"), the message naming the fix.
 */
export const API_ERRORS = {
  VALIDATION_ERROR: 400,
  INVALID_CURSOR: 400,
  BAD_REQUEST: 400,
  INVALID_JSON: 400,
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
  RATE_LIMITED: 429,
  BACKLOG_FULL: 503,
  QUEUE_UNAVAILABLE: 503,
  STORE_UNAVAILABLE: 503,
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
    /** The answer's `Retry-After`, in seconds: for a refusal that waiting ends. */
    readonly retryAfterS?: number,
  ) {
    super(message);
  }
}

/** The body of every error answer. */
export const apiErrorBody = (code: ApiErrorCode, message: string) => ({ error: { code, message } });

/** The answer of a request Node refused before routing (`jsonClientErrorHandler`). */
export function clientErrorAnswer(kind: ClientErrorKind) {
  const code: ApiErrorCode =
    kind === 'timeout'
      ? 'REQUEST_TIMEOUT'
      : kind === 'headers_too_large'
        ? 'HEADERS_TOO_LARGE'
        : 'BAD_REQUEST';
  return {
    status: CLIENT_ERROR_STATUS[kind],
    body: apiErrorBody(code, 'the request could not be read; check its framing and header sizes'),
  };
}

/** The answer of a request the router refused (a malformed URL): Fastify's `frameworkErrors`. */
export function frameworkErrorAnswer(
  error: FastifyError,
  _request: FastifyRequest,
  reply: FastifyReply,
): void {
  void reply.code(400).send(apiErrorBody('BAD_REQUEST', `the request URL is malformed (${error.code})`));
}

/** The API's code of each refusal of a request's body or content type (shared/request-errors.ts). */
const REQUEST_ERROR_CODES: Record<RequestErrorKind, ApiErrorCode> = {
  body_not_json: 'INVALID_JSON',
  payload_too_large: 'PAYLOAD_TOO_LARGE',
  unsupported_media_type: 'UNSUPPORTED_MEDIA_TYPE',
  bad_request: 'BAD_REQUEST',
};

/**
 * The store's refusals that end by themselves (a lock wait that gave up, a PostgreSQL failover:
 * store-error.ts): answered 503 `STORE_UNAVAILABLE`, to retry. A retried `POST /v1/orders` is the
 * same order (its partner_ref), also when the connection was lost during its COMMIT.
 */
const TRANSIENT_STORE_ERRORS = new Set(['STORE_BUSY', 'STORE_UNAVAILABLE', 'STORE_COMMIT_UNKNOWN']);
/** The `Retry-After` of `STORE_UNAVAILABLE`, in seconds: a promotion takes about that long. */
const STORE_RETRY_AFTER_S = 2;

/**
 * The API's error handler: an {@link ApiHttpError} as it says (401s with `WWW-Authenticate`, and its `Retry-After`), a
 * schema's refusal as `VALIDATION_ERROR`, a refused body or content type as the receiver's are
 * (`requestErrorOf`), a transient store error as `STORE_UNAVAILABLE` with `Retry-After`, and
 * anything else as a logged `INTERNAL_ERROR`. `bodyLimit`: the app's, in bytes.
 */
export function apiErrorHandler(bodyLimit: number) {
  return (error: FastifyError | ApiHttpError, request: FastifyRequest, reply: FastifyReply) => {
    if (error instanceof ApiHttpError) {
      const status = API_ERRORS[error.code];
      if (status === 401) reply.header('www-authenticate', 'Bearer realm="h2h-sync"');
      if (error.retryAfterS !== undefined) reply.header('retry-after', String(error.retryAfterS));
      return reply.code(status).send(apiErrorBody(error.code, error.message));
    }
    if (error.validation) {
      const allowed = error.validation[0]?.params.allowedValues;
      const message = Array.isArray(allowed)
        ? `${error.validationContext}/${error.validation[0]!.instancePath.slice(1)} must be one of ${allowed.join(', ')}`
        : error.message;
      return reply.code(400).send(apiErrorBody('VALIDATION_ERROR', `${message}; see /openapi.json`));
    }
    const refused = requestErrorOf(error, bodyLimit);
    if (refused)
      return reply.code(refused.status).send(apiErrorBody(REQUEST_ERROR_CODES[refused.kind], refused.detail));
    if (error instanceof StoreError && TRANSIENT_STORE_ERRORS.has(error.code)) {
      request.log.warn({ reqId: request.id, err: error }, 'the store is unavailable');
      return reply
        .code(503)
        .header('retry-after', String(STORE_RETRY_AFTER_S))
        .send(
          apiErrorBody(
            'STORE_UNAVAILABLE',
            `the order store is busy or failing over (${error.code}); retry the same request after Retry-After seconds: a repeated order with the same partner_ref is one order`,
          ),
        );
    }
    request.log.error({ reqId: request.id, err: error }, 'api failure');
    return reply
      .code(500)
      .send(apiErrorBody('INTERNAL_ERROR', 'the API failed; retry, and report it if it persists'));
  };
}
