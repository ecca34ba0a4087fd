/**
 * The shared rate budget: every upstream call of every process draws from one Redis-backed
 * budget per API key, so that together they never exceed the upstream's limit (spec §8: 60
 * requests per rolling minute) and the upstream never has to answer 429.
 *
 * Why a sliding-window log and not rate-limiter-flexible: its Redis limiter is a fixed window
 * (INCRBY on a key whose TTL starts at the first request of the window), so up to 2 × limit
 * requests can pass within one rolling minute around a window boundary, exactly what makes the
 * upstream answer 429. None of its limiters (Bursty, Union, Queue) bounds a rolling window
 * without giving up a large part of the limit, and none lets two priorities share one window
 * atomically. So the budget is a sorted set of grant timestamps, checked and appended by one Lua
 * script that takes the ceiling of the caller's priority: creation and polling share one window.
 */
import { createHash, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { DEFAULT_RATE_LIMIT_PER_MINUTE } from '../upstream/model.js';

/** Default of {@link RateBudgetOptions.windowMs}: the upstream's rolling minute (spec §8). */
export const DEFAULT_RATE_WINDOW_MS = 60_000;

/** Default of {@link RateBudgetOptions.reservedForCreate}: a third of the limit, rounded (20 of 60). */
export function defaultReservedForCreate(limit: number): number {
  return Math.round(limit / 3);
}

/**
 * Default of {@link RateBudgetOptions.reservedForPolls}: a quarter of the poll share, rounded
 * (10 of the 40 that 60 with 20 kept for creation leaves).
 */
export function defaultReservedForPolls(limit: number, reservedForCreate: number): number {
  return Math.round((limit - reservedForCreate) / 4);
}

/**
 * Default of {@link RateBudgetOptions.pollFloor}: 15 % of the limit, rounded (9 of 60), chosen
 * from `npm run bench:economics --poll-floors 6,9,12` (docs/performance.md, "The poll floor" and
 * "Where the p = 0.25 staleness tail comes from").
 */
export function defaultPollFloor(limit: number): number {
  return Math.round(limit * 0.15);
}

/**
 * Who draws, highest priority first:
 * - `create`: order creation (and profile, catalog, read-back), may use the whole limit;
 * - `poll`: status polls of due orders, only what creation's reserve leaves;
 * - `audit`: re-reading settled orders on idle capacity, only what leaves both creation's reserve
 *   and the polls' headroom free, and nothing while a refused poll is waiting.
 */
export type BudgetPriority = 'create' | 'poll' | 'audit';

/** Options of {@link RateBudget}. */
export interface RateBudgetOptions {
  /** An ioredis connection; the budget does not close it. */
  redis: Redis;
  /** The API key whose budget this is. Only a SHA-256 of it goes into the Redis key name. */
  apiKey: string;
  /** Calls allowed per rolling window. Default: 60 ({@link DEFAULT_RATE_LIMIT_PER_MINUTE}). */
  limit?: number;
  /** The upstream's rolling window in ms. Default: {@link DEFAULT_RATE_WINDOW_MS}. */
  windowMs?: number;
  /**
   * Added to the window to absorb clock and latency skew between a grant here and the request's
   * arrival upstream: a grant is counted for `windowMs + marginMs`. Default: 1000.
   */
  marginMs?: number;
  /**
   * Calls of each window that polling may not use, kept for order creation. Polling may use at
   * most `limit - reservedForCreate`. Default: {@link defaultReservedForCreate}.
   */
  reservedForCreate?: number;
  /**
   * Calls of each window that the audit may not use on top of creation's reserve, kept for due
   * polls: the audit draws only while the window holds fewer than
   * `limit - reservedForCreate - reservedForPolls` grants, so it takes nothing from a busy
   * window, and not at all while a poll refused within the last two windows waits (its grants
   * would hold slots of the rolling window the polls then need). Default: {@link defaultReservedForPolls}.
   */
  reservedForPolls?: number;
  /**
   * Calls of each window that creation leaves to polls while due polls are waiting: when a poll
   * was refused within the last two windows (the reconciler tries again at its pass interval,
   * about one window, so one window could lapse between two passes), creation may use at most `limit - (pollFloor - polls in
   * the window)`, and a poll may draw beyond its ceiling while the window holds fewer than
   * `pollFloor` polls. So a burst of creates at the whole limit cannot stop status polling for
   * its length (lost-webhook orders would stay stale for as long), and without waiting polls
   * creation keeps the whole limit. 0 turns it off. Default: {@link defaultPollFloor}.
   */
  pollFloor?: number;
  /** Prefix of the Redis key. Default: `h2h:rate-budget:`. */
  keyPrefix?: string;
}

/** Options of {@link RateBudget.acquire}. */
export interface AcquireOptions {
  /** Longest wait for a slot before {@link BudgetExhaustedError}. Default: 2 × (windowMs + marginMs). */
  maxWaitMs?: number;
  /** Stops the wait early (rejects with the signal's reason). */
  signal?: AbortSignal;
}

/** Budget use in the current rolling window. */
export interface BudgetUsage {
  /** Grants in the current window (every priority). */
  used: number;
  create: number;
  poll: number;
  audit: number;
  limit: number;
  /** The most polling may use: `limit - reservedForCreate`. */
  pollCeiling: number;
  /** The window's use below which the audit may draw: `pollCeiling - reservedForPolls`. */
  auditCeiling: number;
  /** Polls per window that creation leaves while polls are waiting ({@link RateBudgetOptions.pollFloor}). */
  pollFloor: number;
  /** A poll was refused within the last two windows, so creation now leaves the poll floor free. */
  pollsWaiting: boolean;
  /** `windowMs + marginMs`. */
  windowMs: number;
}

/**
 * The budget for this priority is spent for now. A poll that gets it (the reconciler) ends its
 * pass; `retryAfterMs` says when a slot frees at the earliest.
 */
export class BudgetExhaustedError extends Error {
  override name = 'BudgetExhaustedError';
  readonly code = 'BUDGET_EXHAUSTED' as const;
  constructor(
    readonly priority: BudgetPriority,
    /** Earliest time, in ms from now, at which a slot of this priority frees. */
    readonly retryAfterMs: number,
    options?: { cause?: unknown; waitedMs?: number },
  ) {
    const waited = options?.waitedMs ? ` after waiting ${options.waitedMs} ms` : '';
    super(
      `the shared rate budget for ${priority} calls is spent${waited}; a slot frees in ${retryAfterMs} ms: ` +
        (priority === 'create'
          ? 'too many calls for the upstream limit; try again later'
          : priority === 'poll'
            ? 'end this polling pass and continue in the next one'
            : 'no idle capacity for the audit now; it costs nothing while the budget is busy'),
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
  }
}

/** The result of one attempt to draw: granted, or how long until a slot frees. */
interface DrawResult {
  granted: boolean;
  used: number;
  retryAfterMs: number;
}

// KEYS[1] the window's sorted set, KEYS[2] the flag "a poll was refused within two windows";
// ARGV: window ms (with margin), ceiling of the caller's priority, the member to add (its first
// letter is the priority), the poll floor, the limit. Redis's own clock is the one clock of every
// process. Returns {granted 0|1, used after the call, ms until a slot under the ceiling frees}.
const DRAW_SCRIPT = `
local key = KEYS[1]
local window = tonumber(ARGV[1])
local ceiling = tonumber(ARGV[2])
local kind = string.sub(ARGV[3], 1, 1)
local floor = tonumber(ARGV[4])
local limit = tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local used = redis.call('ZCARD', key)
local function polls()
  local n = 0
  for _, m in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    if string.sub(m, 1, 2) == 'p:' then n = n + 1 end
  end
  return n
end
local waiting = redis.call('EXISTS', KEYS[2]) == 1
if kind == 'a' and waiting then
  return {0, used, window}
end
if floor > 0 and waiting then
  if kind == 'c' then
    ceiling = limit - math.max(0, floor - polls())
  elseif kind == 'p' and used >= ceiling and polls() < floor then
    ceiling = limit
  end
end
if used < ceiling then
  redis.call('ZADD', key, now, ARGV[3])
  redis.call('PEXPIRE', key, window)
  return {1, used + 1, 0}
end
if kind == 'p' then
  redis.call('SET', KEYS[2], '1', 'PX', 2 * window)
  -- The first refusal declares the polls waiting: from now on the floor is theirs.
  if floor > 0 and not waiting and polls() < floor then
    if used < limit then return {0, used, 1} end
    ceiling = limit
  end
end
local idx = used - ceiling
local entry = redis.call('ZRANGE', key, idx, idx, 'WITHSCORES')
if entry[2] == nil then
  return {0, used, window}
end
return {0, used, math.max(1, tonumber(entry[2]) + window - now)}
`;

// KEYS[1] the window's sorted set, KEYS[2] the polls-waiting flag; ARGV[1] window ms.
// Returns {create, poll, audit} grants in the window and whether polls are waiting.
const USAGE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. (now - tonumber(ARGV[1])), '+inf')
local create, poll, audit = 0, 0, 0
for _, m in ipairs(members) do
  local kind = string.sub(m, 1, 2)
  if kind == 'p:' then poll = poll + 1 elseif kind == 'a:' then audit = audit + 1 else create = create + 1 end
end
return {create, poll, audit, redis.call('EXISTS', KEYS[2])}
`;

// KEYS[1] the window's sorted set; ARGV[1] window ms (with margin). Returns the ms until the
// oldest grant still in the window leaves it, 0 when the window holds none.
const OLDEST_LEAVES_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local oldest = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. (now - window), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if oldest[2] == nil then return 0 end
return math.max(1, tonumber(oldest[2]) + window - now)
`;

/** The prefix of a grant's member in the sorted set, by priority (`c:` also for grants of older versions). */
const MEMBER_PREFIX: Record<BudgetPriority, string> = { create: 'c:', poll: 'p:', audit: 'a:' };

const DRAW_SHA = createHash('sha1').update(DRAW_SCRIPT).digest('hex');
const USAGE_SHA = createHash('sha1').update(USAGE_SCRIPT).digest('hex');
const OLDEST_LEAVES_SHA = createHash('sha1').update(OLDEST_LEAVES_SCRIPT).digest('hex');

function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new RangeError(`RateBudget: ${name} must be a positive integer, got ${value}`);
  }
  return value;
}

/** The Redis key of an API key's budget: a hash of the key, never the key itself. */
export function budgetKeyFor(apiKey: string, keyPrefix = 'h2h:rate-budget:'): string {
  return `${keyPrefix}${createHash('sha256').update(apiKey).digest('hex').slice(0, 32)}`;
}

/**
 * One API key's share of the upstream's rate limit, shared by every process through Redis.
 * `acquire` waits for a slot; `tryAcquire` answers at once.
 */
export class RateBudget {
  readonly limit: number;
  readonly windowMs: number;
  readonly marginMs: number;
  readonly reservedForCreate: number;
  readonly reservedForPolls: number;
  readonly pollFloor: number;
  /** The Redis key of this budget (a hash of the API key). */
  readonly key: string;
  /** The Redis key of the flag "a poll was refused within the last two windows". */
  readonly #pollsWaitingKey: string;
  readonly #redis: Redis;

  constructor(options: RateBudgetOptions) {
    if (!options.redis) throw new TypeError('RateBudget: redis is required');
    if (!options.apiKey) throw new TypeError('RateBudget: apiKey is required');
    this.#redis = options.redis;
    this.limit = positiveInteger('limit', options.limit ?? DEFAULT_RATE_LIMIT_PER_MINUTE);
    this.windowMs = positiveInteger('windowMs', options.windowMs ?? DEFAULT_RATE_WINDOW_MS);
    this.marginMs = options.marginMs ?? 1000;
    if (!Number.isSafeInteger(this.marginMs) || this.marginMs < 0) {
      throw new RangeError(`RateBudget: marginMs must be an integer ≥ 0, got ${options.marginMs}`);
    }
    this.reservedForCreate = options.reservedForCreate ?? defaultReservedForCreate(this.limit);
    if (
      !Number.isSafeInteger(this.reservedForCreate) ||
      this.reservedForCreate < 0 ||
      this.reservedForCreate >= this.limit
    ) {
      throw new RangeError(
        `RateBudget: reservedForCreate must be an integer from 0 to limit - 1 (${this.limit - 1}), ` +
          `got ${options.reservedForCreate}`,
      );
    }
    const pollShare = this.limit - this.reservedForCreate;
    this.reservedForPolls =
      options.reservedForPolls ?? defaultReservedForPolls(this.limit, this.reservedForCreate);
    if (
      !Number.isSafeInteger(this.reservedForPolls) ||
      this.reservedForPolls < 0 ||
      this.reservedForPolls > pollShare
    ) {
      throw new RangeError(
        `RateBudget: reservedForPolls must be an integer from 0 to limit - reservedForCreate (${pollShare}), ` +
          `got ${options.reservedForPolls}`,
      );
    }
    this.pollFloor = options.pollFloor ?? defaultPollFloor(this.limit);
    if (!Number.isSafeInteger(this.pollFloor) || this.pollFloor < 0 || this.pollFloor > pollShare) {
      throw new RangeError(
        `RateBudget: pollFloor must be an integer from 0 to limit - reservedForCreate (${pollShare}), ` +
          `got ${options.pollFloor}`,
      );
    }
    this.key = budgetKeyFor(options.apiKey, options.keyPrefix);
    this.#pollsWaitingKey = `${this.key}:polls-waiting`;
  }

  /**
   * The window's use below which `priority` may draw: the limit for `create`,
   * `limit - reservedForCreate` for `poll`, and that minus `reservedForPolls` for `audit`; the
   * poll floor moves the first two while polls are waiting ({@link RateBudgetOptions.pollFloor}).
   */
  ceilingFor(priority: BudgetPriority): number {
    if (priority === 'create') return this.limit;
    const pollCeiling = this.limit - this.reservedForCreate;
    return priority === 'poll' ? pollCeiling : pollCeiling - this.reservedForPolls;
  }

  /**
   * Takes one slot if the window has one for `priority`; false at once when it is spent. With
   * `audit` this asks "is there idle capacity?" and takes one slot of it only if there is.
   */
  async tryAcquire(priority: BudgetPriority): Promise<boolean> {
    return (await this.#draw(priority)).granted;
  }

  /**
   * Takes one slot, waiting (until the oldest grant leaves the window) while the budget for
   * `priority` is spent. Throws {@link BudgetExhaustedError} when no slot frees within `maxWaitMs`.
   */
  async acquire(priority: BudgetPriority, options: AcquireOptions = {}): Promise<void> {
    const maxWaitMs = options.maxWaitMs ?? 2 * (this.windowMs + this.marginMs);
    const started = Date.now();
    for (;;) {
      options.signal?.throwIfAborted();
      const result = await this.#draw(priority);
      if (result.granted) return;
      const waited = Date.now() - started;
      if (waited + result.retryAfterMs > maxWaitMs) {
        throw new BudgetExhaustedError(priority, result.retryAfterMs, { waitedMs: waited });
      }
      // A little jitter so that waiters of several processes do not all retry in the same ms.
      const jitter = Math.floor(Math.random() * Math.min(50, 1 + result.retryAfterMs / 10));
      try {
        await sleep(result.retryAfterMs + jitter, undefined, { signal: options.signal });
      } catch (error) {
        throw options.signal?.aborted ? options.signal.reason : error;
      }
    }
  }

  /** Grants in the current rolling window, by priority. */
  async used(): Promise<BudgetUsage> {
    const [create, poll, audit, waiting] = (await this.#eval(USAGE_SCRIPT, USAGE_SHA, [
      String(this.windowMs + this.marginMs),
    ])) as [number, number, number, number];
    return {
      used: create + poll + audit,
      create,
      poll,
      audit,
      limit: this.limit,
      pollCeiling: this.ceilingFor('poll'),
      auditCeiling: this.ceilingFor('audit'),
      pollFloor: this.pollFloor,
      pollsWaiting: waiting === 1,
      windowMs: this.windowMs + this.marginMs,
    };
  }

  /**
   * In how many ms the oldest grant of the current window leaves it (`windowMs + marginMs` after
   * it was granted, on Redis's clock), or 0 when the window holds no grant. The upstream's rolling
   * window counted the same calls, so from then on it can have room for one more: after a 429
   * without `Retry-After`, the client waits this long before it tries again.
   */
  async oldestGrantLeavesInMs(): Promise<number> {
    return (await this.#eval(OLDEST_LEAVES_SCRIPT, OLDEST_LEAVES_SHA, [
      String(this.windowMs + this.marginMs),
    ])) as number;
  }

  async #draw(priority: BudgetPriority): Promise<DrawResult> {
    const member = `${MEMBER_PREFIX[priority]}${randomUUID()}`;
    const [granted, used, retryAfterMs] = (await this.#eval(DRAW_SCRIPT, DRAW_SHA, [
      String(this.windowMs + this.marginMs),
      String(this.ceilingFor(priority)),
      member,
      String(this.pollFloor),
      String(this.limit),
    ])) as [number, number, number];
    return { granted: granted === 1, used, retryAfterMs };
  }

  /** EVALSHA, loading the script with EVAL when Redis does not know it (after a restart, say). */
  async #eval(script: string, sha: string, args: string[]): Promise<unknown> {
    try {
      return await this.#redis.evalsha(sha, 2, this.key, this.#pollsWaitingKey, ...args);
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('NOSCRIPT')) {
        return this.#redis.eval(script, 2, this.key, this.#pollsWaitingKey, ...args);
      }
      throw error;
    }
  }
}
