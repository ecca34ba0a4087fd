import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { FeedEvent } from '../store/feed.js';
import type { NotifyDelivery } from '../store/notify-deliveries.js';

/**
 * The records of delivered notifications, written after their jobs complete (docs/api.md,
 * "Latency"): a delivery answered 2xx frees its worker slot at once, and its row in the history
 * is group-committed behind it. The write lock of a SQLite store is held most of the time by the
 * processes committing orders at a high rate; a delivery that waited for its record held its
 * slot meanwhile, and every delivery in flight waited on the same batch.
 *
 * Nothing is lost or sent twice on the way, because the 2xx is noted in Redis before the job
 * completes: a hash `<prefix>:<queue>:unrecorded`, job id → the attempt's record.
 * - The process keeps the attempt in memory until its row is durable, and counts it as settled
 *   meanwhile ({@link isPending}): the order's next event goes at once.
 * - Once the row is durable: the job waiting for this event (if any) is promoted (the
 *   `onRecorded` callback: `releaseSuccessor`, which another process's waiting job relies on: it
 *   looks at the store), then the note is deleted.
 * - A run of a job that finds its own note (taken over as stalled after its worker died between
 *   the 2xx and the job's completion; only a job run before looks) sends nothing: it writes the
 *   row from the note, wakes the waiting job and deletes the note ({@link find}, {@link settle}),
 *   and its job completes after that. A note a sweep recorded first is found as the row instead
 *   (`deliverOnce` in deliver-notification.ts).
 * - A process that died with notes whose rows were not written: the next notifier to start (and
 *   every live one, periodically, for notes older than a while) records them ({@link sweep}).
 *   The store records an attempt once (`NotifyDeliveries.record`), so the sweep and a live
 *   process writing the same row leave one.
 */

/** An attempt noted as delivered, whose row may not be in the history yet. */
type Attempt = Omit<NotifyDelivery, 'id'>;

/** Pause before writing a record again after its batch failed (the store locked or down). */
const RETRY_RECORD_MS = 1_000;

export interface DeliveredRecordsOptions {
  redis: Redis;
  /** The queue's own key space (`<prefix>:<queue>`), so the hash sits beside the queue's keys. */
  keyPrefix: string;
  /** Writes one attempt's row (the notifier's group commit); resolves once it is durable. */
  record: (attempt: Attempt) => Promise<unknown>;
  /** Runs once an attempt's row is durable: wakes the job that waits for it. */
  onRecorded: (attempt: Attempt, event: FeedEvent | undefined) => Promise<void>;
  /**
   * Attempts whose rows may be unwritten at once in this process; past it a delivery waits for
   * its own row before its job completes (the store is slower than the deliveries for a while).
   */
  maxPending: number;
  logger?: Logger;
}

export class DeliveredRecords {
  readonly #redis: Redis;
  readonly #key: string;
  readonly #options: DeliveredRecordsOptions;
  /** Attempts noted and not yet durable, by `endpoint-seq`. */
  readonly #pending = new Map<string, number>();
  #pendingCount = 0;
  /** The background writes, for {@link drain}. */
  readonly #writing = new Set<Promise<void>>();
  /** Notes to delete, in one HDEL per turn of the event loop, and the HDELs in flight. */
  #toForget: string[] = [];
  readonly #forgetting = new Set<Promise<void>>();
  #closing = false;

  constructor(options: DeliveredRecordsOptions) {
    this.#options = options;
    this.#redis = options.redis;
    this.#key = `${options.keyPrefix}:unrecorded`;
  }

  /** Whether (endpoint, seq) was delivered by this process and its row is still being written. */
  isPending(endpointId: number, seq: number): boolean {
    return (this.#pending.get(`${endpointId}-${seq}`) ?? 0) > 0;
  }

  /** Attempts noted and not yet durable in this process. */
  get pending(): number {
    return this.#pendingCount;
  }

  /**
   * Notes that job `jobId`'s attempt was answered 2xx, then writes its row in the background.
   * Resolves once the note is in Redis (the job may complete then), or, past `maxPending`, once
   * the row is durable.
   */
  async add(jobId: string, attempt: Attempt, event: FeedEvent | undefined): Promise<void> {
    await this.#redis.hset(this.#key, jobId, JSON.stringify(attempt));
    const key = `${attempt.endpointId}-${attempt.seq}`;
    this.#pending.set(key, (this.#pending.get(key) ?? 0) + 1);
    this.#pendingCount += 1;
    const written = this.#write(jobId, attempt, event).finally(() => {
      this.#pendingCount -= 1;
      const left = (this.#pending.get(key) ?? 1) - 1;
      if (left > 0) this.#pending.set(key, left);
      else this.#pending.delete(key);
    });
    const kept = written.finally(() => this.#writing.delete(kept));
    this.#writing.add(kept);
    if (this.pending > this.#options.maxPending) await written;
  }

  /** The attempt noted for job `jobId` whose row may not be written yet; undefined when none. */
  async find(jobId: string): Promise<Attempt | undefined> {
    const noted = await this.#redis.hget(this.#key, jobId);
    return noted === null ? undefined : (JSON.parse(noted) as Attempt);
  }

  /** Writes the row of a noted attempt now (idempotent), wakes its successor, deletes the note. */
  async settle(jobId: string, attempt: Attempt, event: FeedEvent | undefined): Promise<void> {
    await this.#options.record(attempt);
    await this.#options.onRecorded(attempt, event);
    await this.#redis.hdel(this.#key, jobId);
  }

  /**
   * Records the noted attempts (a process died before their rows were durable): all of them at
   * start-up, those requested before `olderThan` (ms) in a live process's periodic sweep. Returns
   * how many it recorded.
   */
  async sweep(olderThan = Number.POSITIVE_INFINITY): Promise<number> {
    const notes = await this.#redis.hgetall(this.#key);
    let recorded = 0;
    for (const [jobId, noted] of Object.entries(notes)) {
      const attempt = JSON.parse(noted) as Attempt;
      if (attempt.requestedAt >= olderThan) continue;
      await this.settle(jobId, attempt, undefined);
      recorded += 1;
    }
    return recorded;
  }

  /**
   * Waits for the rows being written (before the store closes). A row that cannot be written
   * now is left to the next start's sweep: its note stays.
   */
  async drain(): Promise<void> {
    this.#closing = true;
    while (this.#writing.size > 0 || this.#forgetting.size > 0) {
      await Promise.all([...this.#writing, ...this.#forgetting]);
    }
  }

  async #write(jobId: string, attempt: Attempt, event: FeedEvent | undefined): Promise<void> {
    for (;;) {
      try {
        await this.#options.record(attempt);
        break;
      } catch (err) {
        if (this.#closing) {
          this.#options.logger?.warn(
            { err, jobId },
            'could not record a delivered notification; recorded at the next start',
          );
          return;
        }
        this.#options.logger?.warn({ err, jobId }, 'could not record a delivered notification; trying again');
        await new Promise((resolve) => setTimeout(resolve, RETRY_RECORD_MS));
      }
    }
    try {
      await this.#options.onRecorded(attempt, event);
    } catch (err) {
      // The waiting job runs when its delay ends, and looks at the store itself.
      this.#options.logger?.warn({ err, jobId }, 'could not wake the next notification of an order');
    }
    this.#forget(jobId);
  }

  /** Deletes the note of a recorded attempt, batched: one HDEL per turn of the event loop. */
  #forget(jobId: string): void {
    this.#toForget.push(jobId);
    if (this.#toForget.length > 1) return; // its HDEL is scheduled already
    const flushed: Promise<void> = new Promise<void>((resolve) => setImmediate(resolve))
      .then(async () => {
        const fields = this.#toForget;
        this.#toForget = [];
        // A note left behind is recorded again by a sweep: a no-op (the store records it once).
        await this.#redis.hdel(this.#key, ...fields);
      })
      .catch((err) => {
        this.#options.logger?.warn({ err }, 'could not delete the notes of recorded notifications');
      })
      .finally(() => this.#forgetting.delete(flushed));
    this.#forgetting.add(flushed);
  }
}
