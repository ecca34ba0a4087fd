/**
 * When the client repeats a request, and after how long (spec §7 "Handling rules").
 *
 * Written here rather than with undici's RetryAgent/RetryHandler because that handler cannot
 * express the spec: it does not retry POST by default (rule 3 wants POST /orders repeated with
 * the same partner_ref), it caps Retry-After at its maxTimeout (30 s) and so may retry while the
 * upstream's rolling minute is still full, its backoff has no jitter, and it cannot draw from the
 * shared rate budget before each attempt.
 */

/** Retry settings of the client. */
export interface RetryOptions {
  /** Attempts in all, the first included. Default: 4. */
  maxAttempts?: number;
  /** Backoff base: attempt n waits a random time in [0, min(maxDelayMs, baseDelayMs × 2^(n-1))). Default: 250. */
  baseDelayMs?: number;
  /** Cap of the computed backoff. Default: 30000. */
  maxDelayMs?: number;
  /**
   * The longest wait after a 429 that the client waits out: its `Retry-After`, or without one the
   * wait until the rate window can have room. A 429 asking for longer is surfaced at once (with
   * `retryAfterMs`) instead of blocking the caller. Default: 120000.
   */
  maxRetryAfterMs?: number;
}

export type ResolvedRetryOptions = Required<RetryOptions>;

export const DEFAULT_RETRY: ResolvedRetryOptions = {
  maxAttempts: 4,
  baseDelayMs: 250,
  maxDelayMs: 30_000,
  maxRetryAfterMs: 120_000,
};

/** What one attempt ended with, as far as the policy cares. */
export type AttemptOutcome =
  | {
      kind: 'answer';
      status: number;
      /** A 429's `Retry-After`, in ms, when the upstream sent one. */
      retryAfterMs?: number;
      /**
       * For a 429 without `Retry-After`: in how many ms the upstream's rolling window can have
       * room again (the caller knows: its rate budget's oldest grant leaves the window then, or
       * without a budget one whole window). Absent when the caller does not wait for the window
       * (a status poll, which ends its pass instead): the 429 is then surfaced.
       */
      windowRoomMs?: number;
    }
  | { kind: 'unreachable' };

/** Validates and fills in retry options; a wrong value throws at construction. */
export function resolveRetryOptions(options: RetryOptions = {}): ResolvedRetryOptions {
  const resolved = { ...DEFAULT_RETRY, ...stripUndefined(options) };
  if (!Number.isSafeInteger(resolved.maxAttempts) || resolved.maxAttempts < 1) {
    throw new RangeError(`retry.maxAttempts must be an integer ≥ 1, got ${resolved.maxAttempts}`);
  }
  for (const name of ['baseDelayMs', 'maxDelayMs', 'maxRetryAfterMs'] as const) {
    if (!Number.isFinite(resolved[name]) || resolved[name] < 0) {
      throw new RangeError(`retry.${name} must be a number ≥ 0, got ${resolved[name]}`);
    }
  }
  return resolved;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * Whether the request may be repeated after `outcome`.
 *
 * - 401, 400 and 404: never (rule 1: fix the cause first).
 * - 429: always (rule 2); the upstream refused before doing anything.
 * - 5xx and no answer (network error, timeout): when the request is safe to repeat, which GETs
 *   are and POST /orders is only because the client insists on a partner_ref (rule 3 and §4 rule 7).
 */
export function isRetryable(outcome: AttemptOutcome, safeToRepeat: boolean): boolean {
  if (outcome.kind === 'unreachable') return safeToRepeat;
  if (outcome.status === 429) return true;
  return outcome.status >= 500 && safeToRepeat;
}

/**
 * How long to wait before attempt `attempt + 1`, or undefined when the caller surfaces the 429
 * instead: its wait is beyond `maxRetryAfterMs`, or it has no `Retry-After` and the caller does
 * not wait for the rate window (no `windowRoomMs`).
 *
 * - A 429's `Retry-After` is honoured as sent, plus a little jitter.
 * - A 429 without it waits `windowRoomMs`, plus the same jitter: a backoff of a few hundred ms
 *   would retry inside the rolling minute that refused the call, and be refused again.
 * - Anything else: exponential backoff with full jitter.
 */
export function retryDelayMs(
  attempt: number,
  outcome: AttemptOutcome,
  options: ResolvedRetryOptions,
  random: () => number = Math.random,
): number | undefined {
  if (outcome.kind === 'answer' && outcome.status === 429) {
    const waitMs = outcome.retryAfterMs ?? outcome.windowRoomMs;
    if (waitMs === undefined || waitMs > options.maxRetryAfterMs) return undefined;
    return waitMs + Math.floor(random() * Math.min(options.baseDelayMs, 1000));
  }
  const ceiling = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** (attempt - 1));
  return Math.floor(random() * ceiling);
}

/** `Retry-After` in ms: delta-seconds or an HTTP date (RFC 9110 §10.2.3); undefined when absent or unreadable. */
export function parseRetryAfter(
  value: string | string[] | undefined,
  nowMs = Date.now(),
): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || text.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(text)) return Number.parseInt(text, 10) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
}
