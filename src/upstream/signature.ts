import { createHmac, timingSafeEqual } from 'node:crypto';
import { WEBHOOK_HEADERS } from './model.js';

/**
 * The webhook signature of spec §6 and decisions.md: lowercase hex HMAC-SHA256, keyed with the
 * member's API secret, over `timestamp + "." + raw body`. Signing and verifying live side by
 * side here; the simulator signs with this module and the receiver verifies with it.
 */

/** Default tolerated distance between the signed timestamp and now, either way (decisions.md). */
export const DEFAULT_TOLERANCE_S = 300;

const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;
const DECIMAL_SECONDS = /^[0-9]{1,12}$/;

/** The HMAC-SHA256 bytes of a webhook. */
function signatureBytes(secret: string, timestamp: string | number, rawBody: Buffer | string): Buffer {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest();
}

/** Signs a raw body. `rawBody` must be the exact bytes sent; a string is taken as UTF-8. */
export function signWebhook(secret: string, timestamp: string | number, rawBody: Buffer | string): string {
  return signatureBytes(secret, timestamp, rawBody).toString('hex');
}

/**
 * The reasons a webhook is refused, each with what to fix: the one text of each, which the
 * receiver answers with (its answer codes are these codes).
 */
export const SIGNATURE_FAILURES = {
  SIGNATURE_MISSING: 'the signature or timestamp header is missing; is the sender signing its webhooks?',
  INVALID_SIGNATURE:
    'the signature does not match any configured secret; check the API secret, and that the raw request body is verified as received',
  TIMESTAMP_OUT_OF_TOLERANCE:
    "the timestamp is too far from this server's clock; check both clocks (NTP) and re-sign",
} as const;

export type SignatureFailureCode = keyof typeof SIGNATURE_FAILURES;

export interface VerifyWebhookInput {
  /** The request body exactly as received. Never a re-serialised object. */
  rawBody: Buffer;
  /** The timestamp header as received (unix seconds, decimal). */
  timestamp: string | undefined;
  /** The signature header as received (hex). */
  signature: string | undefined;
  /** Accepted secrets, newest first; more than one while a secret is being rotated. */
  secrets: readonly string[];
  /** Default: {@link DEFAULT_TOLERANCE_S}. */
  toleranceS?: number;
  /** Current unix time in seconds. Default: the clock. */
  nowS?: number;
}

export type VerifyWebhookResult =
  | { ok: true; timestamp: number; secretIndex: number }
  | {
      ok: false;
      code: SignatureFailureCode;
      /** What is wrong and what to fix. */
      message: string;
      /** True when the signature matched but the timestamp did not: the event is authentic. */
      authentic: boolean;
    };

/**
 * Verifies a webhook signature in constant time against each secret. Never throws on bad input:
 * a missing header, malformed hex or a wrong length is a failure result.
 */
export function verifyWebhookSignature(input: VerifyWebhookInput): VerifyWebhookResult {
  const { rawBody, timestamp, signature, secrets } = input;
  if (!timestamp || !signature) {
    return {
      ok: false,
      code: 'SIGNATURE_MISSING',
      message: SIGNATURE_FAILURES.SIGNATURE_MISSING,
      authentic: false,
    };
  }
  const received = HEX_SHA256.test(signature) ? Buffer.from(signature, 'hex') : undefined;
  const secretIndex = received
    ? secrets.findIndex((secret) => timingSafeEqual(signatureBytes(secret, timestamp, rawBody), received))
    : -1;
  if (secretIndex < 0) {
    return {
      ok: false,
      code: 'INVALID_SIGNATURE',
      message: SIGNATURE_FAILURES.INVALID_SIGNATURE,
      authentic: false,
    };
  }
  const seconds = DECIMAL_SECONDS.test(timestamp) ? Number(timestamp) : Number.NaN;
  const nowS = input.nowS ?? Math.floor(Date.now() / 1000);
  const tolerance = input.toleranceS ?? DEFAULT_TOLERANCE_S;
  if (!(Math.abs(nowS - seconds) <= tolerance)) {
    return {
      ok: false,
      code: 'TIMESTAMP_OUT_OF_TOLERANCE',
      message: `the timestamp is more than ${tolerance} s from this server's clock; check both clocks (NTP) and re-sign`,
      authentic: true,
    };
  }
  return { ok: true, timestamp: seconds, secretIndex };
}

/** Headers of a validly signed delivery (default header names), for tests and the simulator. */
export function signedWebhookHeaders(
  secret: string,
  rawBody: Buffer | string,
  timestampS: number = Math.floor(Date.now() / 1000),
) {
  const ts = String(timestampS);
  return {
    [WEBHOOK_HEADERS.timestamp]: ts,
    [WEBHOOK_HEADERS.signature]: signWebhook(secret, ts, rawBody),
  };
}
