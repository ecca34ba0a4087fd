import { SEND_JSON } from '../shared/request-errors.js';
import { SIGNATURE_FAILURES } from '../upstream/signature.js';

/**
 * Every error answer of the webhook receiver: the code (the body's `message`), its HTTP status,
 * and what the sender should do (the body's `error` unless a more specific detail is given).
 * docs/receiver.md's answer table lists the same rows.
 */
export const RECEIVER_ERRORS = {
  SIGNATURE_MISSING: { status: 401, fix: SIGNATURE_FAILURES.SIGNATURE_MISSING },
  INVALID_SIGNATURE: { status: 401, fix: SIGNATURE_FAILURES.INVALID_SIGNATURE },
  TIMESTAMP_OUT_OF_TOLERANCE: { status: 401, fix: SIGNATURE_FAILURES.TIMESTAMP_OUT_OF_TOLERANCE },
  BODY_UNREADABLE: { status: 400, fix: 'the request body could not be read in full; send it again' },
  BAD_REQUEST: { status: 400, fix: 'the request is malformed; check its headers and body framing' },
  NOT_FOUND: { status: 404, fix: 'webhooks are POSTed to the configured webhook path' },
  REQUEST_TIMEOUT: {
    status: 408,
    fix: 'the request was not received in full in time (H2H_RECEIVER_REQUEST_TIMEOUT_MS); send it again',
  },
  PAYLOAD_TOO_LARGE: { status: 413, fix: 'the body is over the size limit (H2H_WEBHOOK_BODY_LIMIT)' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, fix: SEND_JSON },
  HEADERS_TOO_LARGE: {
    status: 431,
    fix: 'the request headers are over the size limit; send fewer or shorter ones',
  },
  INTERNAL_ERROR: { status: 500, fix: 'the receiver failed; retry later, and report it if it persists' },
  QUEUE_UNAVAILABLE: {
    status: 503,
    fix: 'the event queue (Redis) is unavailable and nothing was stored; retry later',
  },
} as const satisfies Record<string, { status: number; fix: string }>;

export type ReceiverErrorCode = keyof typeof RECEIVER_ERRORS;

/** The error body of the upstream spec (§7): `message` is the code, `error` the detail. */
export interface ReceiverErrorBody {
  statusCode: number;
  message: ReceiverErrorCode;
  error: string;
}

/** Builds the answer body of a code; `detail` replaces the default fix. */
export function receiverErrorBody(code: ReceiverErrorCode, detail?: string): ReceiverErrorBody {
  const { status, fix } = RECEIVER_ERRORS[code];
  return { statusCode: status, message: code, error: detail ?? fix };
}

/** An error a route throws to answer with one of {@link RECEIVER_ERRORS}. */
export class ReceiverHttpError extends Error {
  override name = 'ReceiverHttpError';
  readonly body: ReceiverErrorBody;

  constructor(code: ReceiverErrorCode, detail?: string) {
    super(detail ?? RECEIVER_ERRORS[code].fix);
    this.body = receiverErrorBody(code, detail);
  }

  get code(): ReceiverErrorCode {
    return this.body.message;
  }
}
