import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';

/** Default Redis key of the lock. */
export const DEFAULT_PASS_LOCK_KEY = 'h2h:reconcile:pass-lock';
/** Default lifetime of the lock without a renewal; it is renewed every third of it. */
export const DEFAULT_PASS_LOCK_TTL_MS = 30_000;

export interface PassLockOptions {
  /** Default: {@link DEFAULT_PASS_LOCK_KEY}. */
  key?: string;
  /** Default: {@link DEFAULT_PASS_LOCK_TTL_MS}. */
  ttlMs?: number;
}

/** A held lock. */
export interface HeldPassLock {
  /** Who holds it: `host:pid:uuid`. */
  readonly token: string;
  /** Aborts when the lock is lost (it expired before a renewal got through). */
  readonly signal: AbortSignal;
  /**
   * Until when (`Date.now()` ms) the lock is surely ours: the last successful renewal (or the
   * acquisition), counted from when it was sent, plus the TTL. Past it another process may hold
   * it although {@link signal} has not aborted yet (a renewal that Redis has not answered).
   */
  readonly validUntil: number;
  /** Stops renewing and deletes the lock if it is still ours. Safe to call twice. */
  release(): Promise<void>;
}

// Compare-and-act: only the holder's token may renew or delete the lock.
const RENEW_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;
const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/**
 * The lock that makes reconciliation passes run one at a time, across every process that shares
 * the Redis: scheduled passes of any number of workers and `h2h-sync reconcile --once`. A plain
 * `SET NX PX` with a random token, renewed while the pass runs; a crashed holder's lock expires
 * after `ttlMs`. It is not the only guard: orders are also claimed in SQLite (`claimDueForPoll`),
 * so even two passes that overlapped (a holder frozen past its TTL) would not poll one order twice.
 */
export class PassLock {
  readonly key: string;
  readonly ttlMs: number;
  readonly #redis: Redis;

  constructor(redis: Redis, options: PassLockOptions = {}) {
    this.#redis = redis;
    this.key = options.key ?? DEFAULT_PASS_LOCK_KEY;
    this.ttlMs = options.ttlMs ?? DEFAULT_PASS_LOCK_TTL_MS;
    if (!Number.isInteger(this.ttlMs) || this.ttlMs < 100) {
      throw new RangeError(`PassLock: ttlMs must be a whole number ≥ 100, got ${options.ttlMs}`);
    }
  }

  /** Who holds the lock now (`host:pid:uuid`), or null. */
  holder(): Promise<string | null> {
    return this.#redis.get(this.key);
  }

  /** Takes the lock if it is free; undefined when another pass holds it. */
  async acquire(): Promise<HeldPassLock | undefined> {
    const token = `${hostname()}:${process.pid}:${randomUUID()}`;

    const sentAt = Date.now();
    const set = await this.#redis.set(this.key, token, 'PX', this.ttlMs, 'NX');
    if (set !== 'OK') return undefined;

    const controller = new AbortController();
    let renewedAt = sentAt;
    let released = false;
    const renew = async () => {
      const renewSentAt = Date.now();
      try {
        const ok = await this.#redis.eval(RENEW_SCRIPT, 1, this.key, token, String(this.ttlMs));
        if (ok === 1) renewedAt = renewSentAt;
        else controller.abort(new Error(`the pass lock ${this.key} was taken over`));
      } catch (error) {
        // Redis unreachable for a moment: the lock may still be ours until its TTL runs out.
        if (Date.now() - renewedAt >= this.ttlMs) controller.abort(error);
      }
    };
    const timer = setInterval(
      () => {
        if (!released && !controller.signal.aborted) void renew();
      },
      Math.floor(this.ttlMs / 3),
    );
    timer.unref();
    // A lost lock renews no more, whether or not its holder looks at it again.
    controller.signal.addEventListener('abort', () => clearInterval(timer), { once: true });

    const ttlMs = this.ttlMs;
    return {
      token,
      signal: controller.signal,
      get validUntil() {
        return renewedAt + ttlMs;
      },
      release: async () => {
        if (released) return;
        released = true;
        clearInterval(timer);
        await this.#redis.eval(RELEASE_SCRIPT, 1, this.key, token).catch(() => {});
      },
    };
  }
}
