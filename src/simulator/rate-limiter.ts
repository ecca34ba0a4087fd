export type RateDecision = { allowed: true } | { allowed: false; retryAfterS: number };

/**
 * A rolling-window limiter: at most `limit` admitted requests per key within any `windowMs`
 * (spec §8 and decisions.md: one rolling minute, in real time). Refused requests are not counted, so a client that backs off for
 * `Retry-After` seconds is admitted again. A limit of 0 admits everything.
 */
export class RollingWindowLimiter {
  /** Per key: the admission times still inside the window, oldest first. */
  private readonly windows = new Map<string, number[]>();

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
  ) {}

  admit(key: string, now: number = Date.now()): RateDecision {
    if (this.limit === 0) return { allowed: true };
    let times = this.windows.get(key);
    if (!times) {
      times = [];
      this.windows.set(key, times);
    }
    const windowStart = now - this.windowMs;
    let expired = 0;
    while (expired < times.length && times[expired]! <= windowStart) expired++;
    if (expired > 0) times.splice(0, expired);
    if (times.length < this.limit) {
      times.push(now);
      return { allowed: true };
    }
    const oldestLeavesAt = times[0]! + this.windowMs;
    return { allowed: false, retryAfterS: Math.max(1, Math.ceil((oldestLeavesAt - now) / 1000)) };
  }

  clear(): void {
    this.windows.clear();
  }
}
