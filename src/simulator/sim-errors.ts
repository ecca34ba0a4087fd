import { type ErrorBody, errorBody, HTTP_REASON, type UpstreamErrorCode } from '../upstream/model.js';

/**
 * Error codes only the simulator answers with: its fault injection, its control API and its
 * router. The upstream's own codes live in `UPSTREAM_ERRORS` (src/upstream/model.ts).
 */
export const SIMULATOR_ERRORS = {
  /** A path under the API (or anywhere) that has no route. */
  ROUTE_NOT_FOUND: 404,
  /** The `error_5xx` fault. */
  SERVICE_UNAVAILABLE: 503,
  /** The control API was asked about a member the fixture does not have. */
  MEMBER_NOT_FOUND: 404,
  PRODUCT_NOT_FOUND: 404,
  /** The control API refused a status change that decisions.md does not allow. */
  TRANSITION_NOT_ALLOWED: 409,
  /** The control API was called from a non-loopback address. */
  FORBIDDEN: 403,
} as const;
export type SimulatorErrorCode = keyof typeof SIMULATOR_ERRORS;

const REASONS: Record<number, string> = { ...HTTP_REASON, 403: 'Forbidden', 409: 'Conflict' };

/** An error answered in the spec's shape `{statusCode, message, error}`. */
export class SimHttpError extends Error {
  override readonly name = 'SimHttpError';

  constructor(
    readonly body: ErrorBody,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(`${body.statusCode} ${body.message}: ${body.error}`);
  }
}

/** An upstream error (spec §7, decisions.md), e.g. `upstreamError('INVALID_TARGET', 'data.user_id: ...')`. */
export function upstreamError(
  code: UpstreamErrorCode,
  detail?: string,
  headers?: Record<string, string>,
): SimHttpError {
  return new SimHttpError(errorBody(code, detail), headers);
}

/** A simulator-only error; `detail` defaults to the HTTP reason phrase. */
export function simulatorError(code: SimulatorErrorCode, detail?: string): SimHttpError {
  const status = SIMULATOR_ERRORS[code];
  return new SimHttpError({ statusCode: status, message: code, error: detail ?? REASONS[status] ?? 'Error' });
}
