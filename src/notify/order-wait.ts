import type { Redis } from 'ioredis';

/**
 * How an order's later event waits for its earlier one at an endpoint (docs/api.md, "One
 * order's events arrive in sequence") without costing a job run or a Redis look-up per delivery.
 *
 * - {@link RunningDeliveries}: when the earlier event is being delivered by this very process,
 *   the later one's job awaits that run in memory and goes on at once (the hand-off): no move
 *   to delayed, no promotion, no second run of its job. Bounded in waiters and in time, since a
 *   waiter holds a worker slot ({@link RunningDeliveries.handOff}). Both jobs stay active in Redis under
 *   their locks meanwhile, so a crash of the process leaves both to be taken over as stalled:
 *   nothing is lost, and the order is kept because the later one looks at the earlier one's
 *   record again before it sends.
 * - {@link WaitMarks}: when the earlier event is anywhere else (another process, waiting for its
 *   retry), the later job moves itself to delayed and leaves a mark in Redis naming itself. The
 *   earlier event's delivery, once settled, takes the mark (one GETDEL) and promotes the job it
 *   names; without a mark nobody waits, and nothing else is looked up.
 */

/** The deliveries this process is running now, by endpoint and seq. */
export class RunningDeliveries {
  readonly #runs = new Map<string, Promise<void>>();
  readonly #maxWaiters: number;
  #waiters = 0;

  /**
   * `maxWaiters`: jobs that may await an earlier run at once. A waiter holds a worker slot, so
   * without a bound a slow or hung endpoint's orders could fill every slot and stall the other
   * endpoints; past the bound (or past {@link handOff}'s time) a job waits delayed instead.
   */
  constructor(maxWaiters = Number.POSITIVE_INFINITY) {
    this.#maxWaiters = maxWaiters;
  }

  /** How many deliveries this process is running now. */
  get count(): number {
    return this.#runs.size;
  }

  /** Notes that (endpoint, seq) is being delivered here; call the returned function when its run ends, however. */
  start(endpointId: number, seq: number): () => void {
    const key = `${endpointId}-${seq}`;
    let end!: () => void;
    const run = new Promise<void>((resolve) => {
      end = resolve;
    });
    this.#runs.set(key, run);
    return () => {
      if (this.#runs.get(key) === run) this.#runs.delete(key);
      end();
    };
  }

  /**
   * The hand-off: awaits the run delivering (endpoint, seq) in this process, for at most
   * `maxWaitMs`. True when it ended meanwhile (the caller looks at its record again); false at
   * once when no such run is here or `maxWaiters` jobs already wait, and false when the time ran
   * out: the caller then waits delayed, freeing its slot.
   */
  async handOff(endpointId: number, seq: number, maxWaitMs: number): Promise<boolean> {
    const run = this.#runs.get(`${endpointId}-${seq}`);
    if (!run || this.#waiters >= this.#maxWaiters) return false;
    this.#waiters++;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        run.then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), maxWaitMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
      this.#waiters--;
    }
  }
}

/** The marks that a delayed job waits for an earlier event of its order (see the module comment). */
export class WaitMarks {
  readonly #redis: Redis;
  readonly #prefix: string;

  /**
   * `keyPrefix`: the queue's own key space (`<prefix>:<queue>`), so the marks sit beside the
   * queue's keys. Obliterating the queue does not remove them; their TTL does.
   */
  constructor(redis: Redis, keyPrefix: string) {
    this.#redis = redis;
    this.#prefix = `${keyPrefix}:order-wait:`;
  }

  #key(endpointId: number, seq: number): string {
    return `${this.#prefix}ep${endpointId}-${seq}`;
  }

  /**
   * Notes that job `jobId` waits for (endpoint, `predecessorSeq`), for `ttlMs` (longer than the
   * job's delay: once the delay is over, the job runs and marks again if it still waits).
   */
  async mark(endpointId: number, predecessorSeq: number, jobId: string, ttlMs: number): Promise<void> {
    await this.#redis.set(this.#key(endpointId, predecessorSeq), jobId, 'PX', Math.max(1, Math.round(ttlMs)));
  }

  /** The id of the job marked as waiting for (endpoint, seq), or null; the mark stays. */
  waiting(endpointId: number, seq: number): Promise<string | null> {
    return this.#redis.get(this.#key(endpointId, seq));
  }

  /** Takes the mark left for (endpoint, seq): the id of the job that waits for it, or null. */
  take(endpointId: number, seq: number): Promise<string | null> {
    return this.#redis.getdel(this.#key(endpointId, seq));
  }
}
