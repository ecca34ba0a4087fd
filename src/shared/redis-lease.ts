import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';

/** Default lifetime of a lease without a renewal; it is renewed every third of it. */
export const DEFAULT_LEASE_TTL_MS = 30_000;

export interface RedisLeaseOptions {
  /** The Redis key of the lease; every process that must exclude the others names the same one. */
  key: string;
  /** Lifetime without a renewal, in ms, at least 100. Default: {@link DEFAULT_LEASE_TTL_MS}. */
  ttlMs?: number;
}

/** A held lease. */
export interface HeldRedisLease {
  /** Who holds it: `host:pid:uuid`. */
  readonly token: string;
  /** Aborts when the lease is lost (it expired before a renewal got through). */
  readonly signal: AbortSignal;
  /**
   * Until when (`Date.now()` ms) the lease is surely ours: the last successful renewal (or the
   * acquisition), counted from when it was sent, plus the TTL. Past it another process may hold
   * it although {@link signal} has not aborted yet (a renewal that Redis has not answered).
   */
  readonly validUntil: number;
  /** Stops renewing and deletes the lease if it is still ours. Safe to call twice. */
  release(): Promise<void>;
}

// Compare-and-act: only the holder's token may renew or delete the lease.
const RENEW_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;
const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/**
 * A lease on a Redis key that one process at a time holds, across every process that shares the
 * Redis: a plain `SET NX PX` with a random token, renewed every third of `ttlMs` while it is
 * held, deleted by compare-and-delete on release; a crashed holder's lease expires after `ttlMs`.
 * A holder frozen past the TTL can lose it to another before it notices, so work that must never
 * overlap needs a second guard: the reconciler, whose passes run under such a lease (the pass
 * lock), also claims each order in the store (docs/reconciler.md, "One pass at a time").
 */
export class RedisLease {
  readonly key: string;
  readonly ttlMs: number;
  readonly #redis: Redis;

  constructor(redis: Redis, options: RedisLeaseOptions) {
    this.#redis = redis;
    this.key = options.key;
    this.ttlMs = options.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    if (!Number.isInteger(this.ttlMs) || this.ttlMs < 100) {
      throw new RangeError(`RedisLease: ttlMs must be a whole number ≥ 100, got ${options.ttlMs}`);
    }
  }

  /** Who holds the lease now (`host:pid:uuid`), or null. */
  holder(): Promise<string | null> {
    return this.#redis.get(this.key);
  }

  /** Takes the lease if it is free; undefined when another process holds it. */
  async acquire(): Promise<HeldRedisLease | undefined> {
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
        else controller.abort(new Error(`the lease ${this.key} was taken over`));
      } catch (error) {
        // Redis unreachable for a moment: the lease may still be ours until its TTL runs out.
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
    // A lost lease renews no more, whether or not its holder looks at it again.
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
