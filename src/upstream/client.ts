/**
 * The upstream H2H API client: one typed method per endpoint (spec §4), one undici pool per
 * client, the retry policy of spec §7 (see retry-policy.ts) and, when given, the shared rate
 * budget drawn before every attempt.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { Pool } from 'undici';
import {
  BudgetExhaustedError,
  type BudgetPriority,
  DEFAULT_RATE_WINDOW_MS,
  type RateBudget,
} from '../rate-budget/rate-budget.js';
import {
  AUTH_STYLES,
  type AuthStyle,
  DEFAULT_AUTH_STYLE,
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_HEADERS_TIMEOUT_MS,
} from './defaults.js';
import { OrderInputError, type UnreachableCode, UpstreamError, UpstreamUnreachableError } from './errors.js';
import {
  API_PREFIX,
  type Category,
  type Order,
  type OrderInput,
  type Product,
  type Profile,
  partnerRefProblem,
} from './model.js';
import {
  type AttemptOutcome,
  isRetryable,
  parseRetryAfter,
  type ResolvedRetryOptions,
  type RetryOptions,
  resolveRetryOptions,
  retryDelayMs,
} from './retry-policy.js';

/** Options of {@link UpstreamClient}. */
export interface UpstreamClientOptions {
  /**
   * The upstream's base URL, for example `https://api.example.com` or the simulator's
   * `http://127.0.0.1:4010/v1/member-api`. `/v1/member-api` is appended when the path does not
   * already end with it. Required.
   */
  baseUrl: string;
  /** The member's API key. Required; never logged. */
  apiKey: string;
  /** `x-api-key: KEY` or `Authorization: Bearer KEY`. Default: {@link DEFAULT_AUTH_STYLE}. */
  authStyle?: AuthStyle;
  /** TCP (and TLS) connect timeout in ms. Default: {@link DEFAULT_CONNECT_TIMEOUT_MS}. */
  connectTimeoutMs?: number;
  /** Time to wait for the response headers, in ms. Default: {@link DEFAULT_HEADERS_TIMEOUT_MS}. */
  headersTimeoutMs?: number;
  /** Longest silence while reading the response body, in ms. Default: {@link DEFAULT_BODY_TIMEOUT_MS}. */
  bodyTimeoutMs?: number;
  /**
   * Retry policy (spec §7). Defaults: 4 attempts, 250 ms base, 30 s cap, a 429's wait (its
   * Retry-After, or the wait for the rate window) honoured up to 120 s.
   */
  retry?: RetryOptions;
  /**
   * The upstream's rolling rate window in ms (spec §8: a minute). Without a budget, a 429 without
   * `Retry-After` is retried after one whole window: by then the window that refused the call has
   * moved past every call it counted. With a budget this is not used: the wait is until the
   * budget's oldest grant leaves its window ({@link RateBudget.oldestGrantLeavesInMs}).
   * Default: {@link DEFAULT_RATE_WINDOW_MS}.
   */
  rateWindowMs?: number;
  /**
   * The shared rate budget. When given, every attempt draws one slot first: profile, catalog and
   * createOrder wait for a `create` slot; getOrder takes a `poll` slot without waiting and throws
   * {@link BudgetExhaustedError} when the poll share is spent. A call with a `poll` slot does not
   * wait for the rate window after a 429 without `Retry-After` either: it throws the 429 at once.
   * Default: none (no budget).
   */
  budget?: RateBudget;
  /** Longest wait for a `create` slot of the budget, in ms. Default: the budget's own (2 windows). */
  budgetMaxWaitMs?: number;
  /** Gets one debug line per attempt (method, path, status, attempt, duration). Default: none. */
  logger?: Logger;
}

/** Options of {@link UpstreamClient.getOrder}. */
export interface GetOrderOptions {
  /**
   * `poll` (default): a status poll. It takes a budget slot only if the poll share has one, and
   * throws {@link BudgetExhaustedError} otherwise, so that a reconciliation pass ends instead of
   * waiting. For the same reason it does not wait for the rate window after a 429 without
   * `Retry-After`: it throws the 429's {@link UpstreamError} at once, its `retryAfterMs` saying
   * when the window can have room. `create`: part of order placement (reading back a created
   * order); waits for a slot, and for the window after such a 429, like createOrder.
   */
  priority?: BudgetPriority;
}

/**
 * How a caller guards and follows one {@link UpstreamClient.createOrder} call (the order's claim:
 * src/orders/hold-claim.ts). Every field is optional.
 */
export interface CreateOrderOptions {
  /** Ends a wait for a budget slot or between attempts early; its reason is thrown. */
  signal?: AbortSignal;
  /**
   * Called (and awaited) right before each attempt is sent, after its budget slot was granted;
   * what it throws is thrown, and nothing more is sent.
   */
  beforeSend?: () => void | Promise<void>;
  /**
   * Called after each attempt that may have reached the upstream without a definite answer: no
   * answer once the request could have left (anything but a refused or timed-out connection), a
   * 5xx, or a 2xx whose body cannot be read. The order may then exist upstream, so a later 4xx
   * of the same call is no rejection (decisions.md, "Errors on create").
   */
  onUnanswered?: () => void;
}

interface CallSpec extends CreateOrderOptions {
  method: 'GET' | 'POST';
  path: string;
  body?: string;
  priority: BudgetPriority;
  /** Whether the budget draw may wait for a slot. */
  waitForBudget: boolean;
  /** Whether repeating the request after no answer or a 5xx cannot do harm (GET, or POST with a partner_ref). */
  safeToRepeat: boolean;
  /** A 404 is an answer ("no such order"), not a sign of a wrong base URL: `GET /orders/:ref` only. */
  notFoundIsAnswer?: boolean;
}

type Attempt =
  | { kind: 'answer'; status: number; text: string; retryAfterMs: number | undefined }
  | { kind: 'unreachable'; code: UnreachableCode; cause: unknown };

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
// Network errors raised before a connection existed: the request cannot have left.
const NOT_CONNECTED_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
]);
// Errors of undici that mean a programming or lifecycle error here, not a network failure.
const NOT_NETWORK_CODES = new Set([
  'UND_ERR_INVALID_ARG',
  'UND_ERR_INVALID_RETURN_VALUE',
  'UND_ERR_DESTROYED',
  'UND_ERR_CLOSED',
  'UND_ERR_ABORTED',
  'UND_ERR_NOT_SUPPORTED',
]);

const REASON_CODES: Record<number, string> = {
  429: 'TOO_MANY_REQUESTS',
  502: 'BAD_GATEWAY',
  503: 'SERVICE_UNAVAILABLE',
  504: 'GATEWAY_TIMEOUT',
};

function positiveMs(name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0) {
    throw new RangeError(`UpstreamClient: ${name} must be a positive number of ms, got ${value}`);
  }
  return value;
}

/** The pool's origin and the path prefix of every endpoint, from the configured base URL. */
function splitBaseUrl(baseUrl: string): { origin: string; basePath: string } {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new TypeError(`UpstreamClient: baseUrl is not a URL: ${JSON.stringify(baseUrl)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError(`UpstreamClient: baseUrl must be http or https, got ${url.protocol}`);
  }
  if (url.search || url.hash || url.username || url.password) {
    throw new TypeError('UpstreamClient: baseUrl must not carry a query, fragment or credentials');
  }
  let basePath = url.pathname.replace(/\/+$/, '');
  if (!basePath.endsWith(API_PREFIX)) basePath += API_PREFIX;
  return { origin: url.origin, basePath };
}

/** The code of a network error (`ECONNRESET`, `UND_ERR_HEADERS_TIMEOUT` …), or '' when it has none. */
function causeCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : '';
}

function networkCode(error: unknown): UnreachableCode | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    if (TIMEOUT_CODES.has(code) || code === 'ETIMEDOUT') return 'TIMEOUT';
    if (NOT_NETWORK_CODES.has(code)) return undefined;
    if (code.startsWith('UND_ERR_') || /^E[A-Z]+$/.test(code)) return 'NETWORK_ERROR';
  }
  return undefined;
}

/** Code and detail of an error answer, from a body of the spec's shape or anything else a proxy sends. */
function readErrorBody(status: number, text: string): { code: string; detail: string } {
  try {
    const body: unknown = JSON.parse(text);
    if (body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string') {
      const { message, error } = body as { message: string; error?: unknown };
      return { code: message, detail: typeof error === 'string' ? error : '' };
    }
  } catch {
    // Not JSON: a proxy's HTML page, for example. Fall through to the status.
  }
  const excerpt = text.replace(/\s+/g, ' ').trim().slice(0, 200);
  return { code: REASON_CODES[status] ?? `HTTP_${status}`, detail: excerpt };
}

/**
 * A client of the upstream H2H API. Create one per base URL and API key, share it, and `close()`
 * it at shutdown.
 */
export class UpstreamClient {
  readonly #pool: Pool;
  readonly #basePath: string;
  readonly #authHeaders: Record<string, string>;
  readonly #retry: ResolvedRetryOptions;
  readonly #budget: RateBudget | undefined;
  readonly #budgetMaxWaitMs: number | undefined;
  readonly #rateWindowMs: number;
  readonly #logger: Logger | undefined;

  constructor(options: UpstreamClientOptions) {
    const { origin, basePath } = splitBaseUrl(options.baseUrl);
    if (typeof options.apiKey !== 'string' || options.apiKey.trim() === '') {
      throw new TypeError('UpstreamClient: apiKey is required');
    }
    const authStyle = options.authStyle ?? DEFAULT_AUTH_STYLE;
    if (!AUTH_STYLES.includes(authStyle)) {
      throw new TypeError(`UpstreamClient: authStyle must be 'x-api-key' or 'bearer', got ${authStyle}`);
    }
    this.#authHeaders =
      authStyle === 'bearer'
        ? { authorization: `Bearer ${options.apiKey}` }
        : { 'x-api-key': options.apiKey };
    this.#basePath = basePath;
    this.#retry = resolveRetryOptions(options.retry);
    this.#budget = options.budget;
    this.#budgetMaxWaitMs = options.budgetMaxWaitMs;
    this.#rateWindowMs = positiveMs('rateWindowMs', options.rateWindowMs ?? DEFAULT_RATE_WINDOW_MS);
    this.#logger = options.logger;
    this.#pool = new Pool(origin, {
      connectTimeout: positiveMs('connectTimeoutMs', options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS),
      headersTimeout: positiveMs('headersTimeoutMs', options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS),
      bodyTimeout: positiveMs('bodyTimeoutMs', options.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS),
    });
  }

  /**
   * GET /profile: the member and its balance. With `priority: 'poll'` it takes a poll slot of the
   * budget without waiting, as a status poll does (the reconciler's probe); by default it waits
   * for a `create` slot.
   */
  profile(options: { priority?: BudgetPriority } = {}): Promise<Profile> {
    return this.#call<Profile>(this.#get('/profile', options.priority));
  }

  /**
   * GET /categories. With `priority: 'poll'` it takes a poll slot of the budget without waiting
   * (the catalog sync: it never takes creation's reserve); by default it waits for a `create` slot.
   */
  categories(options: { priority?: BudgetPriority } = {}): Promise<Category[]> {
    return this.#call<Category[]>(this.#get('/categories', options.priority));
  }

  /**
   * GET /products, optionally of one category. Accepts a plain array or one under `data`.
   * `priority` as for {@link categories}.
   */
  async products(options: { categoryCode?: string; priority?: BudgetPriority } = {}): Promise<Product[]> {
    const query = options.categoryCode
      ? `?${new URLSearchParams({ category_code: options.categoryCode })}`
      : '';
    const spec = this.#get(`/products${query}`, options.priority);
    const body = await this.#call<unknown>(spec);
    if (Array.isArray(body)) return body as Product[];
    const data = (body as { data?: unknown } | null)?.data;
    if (Array.isArray(data)) return data as Product[];
    throw new UpstreamError({
      status: 200,
      code: 'INVALID_RESPONSE',
      detail: 'products: neither an array nor an array under data',
      method: spec.method,
      path: spec.path,
      attempts: 1,
    });
  }

  /**
   * POST /orders. The input must carry a `partner_ref`: it is what makes a repeat after a timeout,
   * a network error or a 5xx safe (spec §4 rule 7), and the client repeats with the same input.
   * Resolves with the new order (201) or the existing one for a used partner_ref (200).
   * After the last attempt without an answer it throws {@link UpstreamUnreachableError}: the order
   * may exist; read it by its partner_ref before anything else.
   */
  async createOrder(input: OrderInput, options: CreateOrderOptions = {}): Promise<Order> {
    const ref = input.partner_ref;
    if (typeof ref !== 'string' || ref === '') {
      throw new OrderInputError(
        'PARTNER_REF_REQUIRED',
        'createOrder needs a partner_ref: without it a retry after a timeout could create a second order (spec §4 rule 7)',
      );
    }
    const problem = partnerRefProblem(ref);
    if (problem) throw new OrderInputError('PARTNER_REF_TOO_LONG', problem);
    if (!input.product_code && !input.product_id) {
      throw new OrderInputError('PRODUCT_REQUIRED', 'createOrder needs a product_code or a product_id');
    }
    return this.#call<Order>({
      method: 'POST',
      path: `${this.#basePath}/orders`,
      body: JSON.stringify(input),
      priority: 'create',
      waitForBudget: true,
      safeToRepeat: true,
      ...options,
    });
  }

  /** GET /orders/:ref by partner_ref or invoice number (URL-encoded here). */
  async getOrder(ref: string, options: GetOrderOptions = {}): Promise<Order> {
    if (typeof ref !== 'string' || ref === '') throw new TypeError('getOrder needs a ref');
    const priority = options.priority ?? 'poll';
    return this.#call<Order>({
      method: 'GET',
      path: `${this.#basePath}/orders/${encodeURIComponent(ref)}`,
      priority,
      waitForBudget: priority === 'create',
      safeToRepeat: true,
      notFoundIsAnswer: true,
    });
  }

  /** Closes the connection pool after the requests in flight. */
  async close(): Promise<void> {
    await this.#pool.close();
  }

  #get(path: string, priority: BudgetPriority = 'create'): CallSpec {
    return {
      method: 'GET',
      path: `${this.#basePath}${path}`,
      priority,
      waitForBudget: priority === 'create',
      safeToRepeat: true,
    };
  }

  async #call<T>(spec: CallSpec): Promise<T> {
    const { maxAttempts } = this.#retry;
    let lastError: unknown;
    for (let attempt = 1; ; attempt++) {
      await this.#drawBudget(spec, lastError);
      await spec.beforeSend?.();
      const started = performance.now();
      const result = await this.#attempt(spec);
      const durationMs = Math.round(performance.now() - started);

      if (result.kind === 'answer' && result.status >= 200 && result.status < 300) {
        this.#logAttempt(spec, attempt, durationMs, result.status);
        return this.#parseSuccess<T>(spec, result.status, result.text, attempt);
      }
      if (
        result.kind === 'answer' ? result.status >= 500 : !NOT_CONNECTED_CODES.has(causeCode(result.cause))
      ) {
        spec.onUnanswered?.();
      }

      const windowRoomMs =
        result.kind === 'answer' && result.status === 429 && result.retryAfterMs === undefined
          ? await this.#windowRoomMs()
          : undefined;
      const outcome: AttemptOutcome =
        result.kind === 'answer'
          ? {
              kind: 'answer',
              status: result.status,
              retryAfterMs: result.retryAfterMs,
              // A call that never waits for the budget (a poll) does not wait for the window either.
              windowRoomMs: spec.waitForBudget ? windowRoomMs : undefined,
            }
          : { kind: 'unreachable' };
      const error = this.#failure(spec, result, attempt, windowRoomMs);
      const delayMs =
        attempt < maxAttempts && isRetryable(outcome, spec.safeToRepeat)
          ? retryDelayMs(attempt, outcome, this.#retry)
          : undefined;
      this.#logAttempt(spec, attempt, durationMs, result.kind === 'answer' ? result.status : result.code, {
        code: error.code,
        retryInMs: delayMs,
      });
      if (delayMs === undefined) throw error;
      lastError = error;
      try {
        await sleep(delayMs, undefined, { signal: spec.signal });
      } catch (sleepError) {
        throw spec.signal?.aborted ? spec.signal.reason : sleepError;
      }
    }
  }

  /**
   * After a 429 without Retry-After: in how many ms the upstream's rolling window can have room,
   * that is when the oldest call it counted leaves it. The budget knows when its oldest grant
   * leaves; a window without grants (or a budget that cannot be read) explains nothing, so the
   * wait is then one whole window, as without a budget.
   */
  async #windowRoomMs(): Promise<number> {
    if (!this.#budget) return this.#rateWindowMs;
    const wholeWindow = this.#budget.windowMs + this.#budget.marginMs;
    // A Redis error here is not the caller's: the next draw from the budget reports it.
    const leavesInMs = await this.#budget.oldestGrantLeavesInMs().catch(() => 0);
    return leavesInMs > 0 ? leavesInMs : wholeWindow;
  }

  async #drawBudget(spec: CallSpec, lastError: unknown): Promise<void> {
    if (!this.#budget) return;
    try {
      await this.#budget.acquire(spec.priority, {
        // A poll never waits: the reconciler ends its pass instead (issue 5).
        maxWaitMs: spec.waitForBudget ? this.#budgetMaxWaitMs : 0,
        ...(spec.signal ? { signal: spec.signal } : {}),
      });
    } catch (error) {
      if (error instanceof BudgetExhaustedError && lastError !== undefined) {
        throw new BudgetExhaustedError(error.priority, error.retryAfterMs, { cause: lastError });
      }
      throw error;
    }
  }

  /** One request; the body is always read to the end (or destroyed by undici on error). */
  async #attempt(spec: CallSpec): Promise<Attempt> {
    const headers: Record<string, string> = {
      accept: 'application/json',
      'user-agent': 'h2h-sync',
      ...this.#authHeaders,
    };
    if (spec.body !== undefined) headers['content-type'] = 'application/json';
    try {
      const response = await this.#pool.request({
        method: spec.method,
        path: spec.path,
        headers,
        body: spec.body,
      });
      const text = await response.body.text();
      return {
        kind: 'answer',
        status: response.statusCode,
        text,
        retryAfterMs:
          response.statusCode === 429 ? parseRetryAfter(response.headers['retry-after']) : undefined,
      };
    } catch (error) {
      const code = networkCode(error);
      if (code === undefined) throw error;
      return { kind: 'unreachable', code, cause: error };
    }
  }

  #failure(
    spec: CallSpec,
    result: Attempt,
    attempts: number,
    windowRoomMs: number | undefined,
  ): UpstreamError | UpstreamUnreachableError {
    if (result.kind === 'unreachable') {
      return new UpstreamUnreachableError({
        code: result.code,
        method: spec.method,
        path: spec.path,
        attempts,
        cause: result.cause,
      });
    }
    const { code, detail } = readErrorBody(result.status, result.text);
    return new UpstreamError({
      status: result.status,
      code,
      detail,
      method: spec.method,
      path: spec.path,
      attempts,
      retryAfterMs: result.retryAfterMs ?? windowRoomMs,
      outcomeUnknown: spec.method === 'POST' && result.status >= 500,
      notFoundIsAnswer: spec.notFoundIsAnswer ?? false,
    });
  }

  #parseSuccess<T>(spec: CallSpec, status: number, text: string, attempts: number): T {
    try {
      return JSON.parse(text) as T;
    } catch {
      spec.onUnanswered?.();
      throw new UpstreamError({
        status,
        code: 'INVALID_RESPONSE',
        detail: `not JSON: ${text.replace(/\s+/g, ' ').trim().slice(0, 200)}`,
        method: spec.method,
        path: spec.path,
        attempts,
        // The order may well have been created; only the answer is unreadable.
        outcomeUnknown: spec.method === 'POST',
      });
    }
  }

  #logAttempt(
    spec: CallSpec,
    attempt: number,
    durationMs: number,
    status: number | string,
    extra: { code?: string; retryInMs?: number | undefined } = {},
  ): void {
    this.#logger?.debug(
      { method: spec.method, path: spec.path, status, attempt, durationMs, ...extra },
      'upstream call',
    );
  }
}
