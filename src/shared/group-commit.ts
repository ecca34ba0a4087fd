import type { Outcome } from '../store/sql/executor.js';

/** Default of {@link GroupCommitOptions.maxBatchSize}. */
export const DEFAULT_MAX_BATCH_SIZE = 100;

export interface GroupCommitOptions<I, O> {
  /**
   * Runs a batch's items in ONE transaction, each in its own savepoint, and resolves after COMMIT
   * with an outcome per item, in order; rejects when the transaction as a whole failed (the write
   * lock not taken in time, COMMIT, I/O). The store's `writer.applyBatch` and
   * `outbox.settleBatch` are such functions (`StoreDb.writeBatch` underneath).
   */
  runBatch: (items: readonly I[]) => Promise<Outcome<O>[]>;
  /**
   * A batch is committed as soon as it holds this many items, without waiting for the next
   * turn of the event loop. Default: {@link DEFAULT_MAX_BATCH_SIZE}.
   */
  maxBatchSize?: number;
}

/** Figures since the committer was created, for logs and the bench. */
export interface GroupCommitStats {
  /** Outer transactions committed. */
  commits: number;
  /** Units whose writes were committed. */
  committed: number;
  /** Units that failed (their own savepoint rolled back, or the whole batch failed). */
  failed: number;
  /** The largest batch committed. */
  largestBatch: number;
  /** Milliseconds from each batch's start (its first try for the write lock) to its commit (or failure). */
  busyMs: number;
}

interface PendingUnit<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit: many small write transactions share one fsync.
 *
 * Each {@link submit} queues an item (for the worker, one event to apply). The queued items run
 * on the next turn of the event loop, or at once when {@link GroupCommitOptions.maxBatchSize}
 * are waiting, through `runBatch`: ONE transaction, each item in its own savepoint. An item that
 * fails rolls back its own savepoint only, and only its promise rejects. The promises settle
 * after the COMMIT has returned, so a caller learns of success only once its writes are durable
 * (`synchronous=FULL`); if the COMMIT (or taking the write lock) fails, every item of the batch
 * rejects with that error and nothing of the batch is written.
 *
 * One batch runs at a time: while one waits for the write lock or commits, the next gathers,
 * so batches commit in order and grow with the load.
 */
export class GroupCommit<I, O> {
  readonly #maxBatchSize: number;
  readonly #runBatch: (items: readonly I[]) => Promise<Outcome<O>[]>;
  #pending: PendingUnit<I, O>[] = [];
  #scheduled: NodeJS.Immediate | undefined;
  /** The batch running; the next one runs after it, so batches commit in order. */
  #waiting: Promise<void> | undefined;
  readonly #stats: GroupCommitStats = {
    commits: 0,
    committed: 0,
    failed: 0,
    largestBatch: 0,
    busyMs: 0,
  };

  constructor({ runBatch, maxBatchSize = DEFAULT_MAX_BATCH_SIZE }: GroupCommitOptions<I, O>) {
    if (!Number.isInteger(maxBatchSize) || maxBatchSize < 1) {
      throw new RangeError(`maxBatchSize must be a whole number ≥ 1, got ${maxBatchSize}`);
    }
    this.#runBatch = runBatch;
    this.#maxBatchSize = maxBatchSize;
  }

  /**
   * Queues `item` for the next batch. Resolves with its result once the batch is committed;
   * rejects with its own error (its writes rolled back), or with the batch's error when the
   * batch could not be committed.
   */
  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#pending.push({ item, resolve, reject });
      if (this.#pending.length >= this.#maxBatchSize) this.flush();
      else this.#scheduled ??= setImmediate(() => this.flush());
    });
  }

  /** Units queued and not yet run. */
  get pending(): number {
    return this.#pending.length;
  }

  get stats(): Readonly<GroupCommitStats> {
    return { ...this.#stats };
  }

  /**
   * Runs and commits everything queued now (normally called by {@link submit}'s scheduling).
   * The batch starts at once (the store's first try for the write lock included); while it waits
   * or commits, this returns, and later batches wait behind it.
   */
  flush(): void {
    if (this.#scheduled) clearImmediate(this.#scheduled);
    this.#scheduled = undefined;
    if (this.#waiting) return; // runs again when the waiting batch is done
    const batch = this.#pending;
    if (batch.length === 0) return;
    this.#pending = [];
    const started = performance.now();
    let committed: Promise<Outcome<O>[]>;
    try {
      committed = this.#runBatch(batch.map((unit) => unit.item));
    } catch (error) {
      committed = Promise.reject(error);
    }
    const settled = committed.then(
      (outcomes) => this.#settle(batch, outcomes, started),
      (error: unknown) => this.#fail(batch, error, started),
    );
    // Until this batch has committed (or failed), later ones gather and wait behind it.
    this.#waiting = settled.then(() => {
      this.#waiting = undefined;
      if (this.#pending.length > 0) this.flush();
    });
  }

  /** Resolves once everything queued so far is committed (or failed): before closing the database. */
  async drain(): Promise<void> {
    while (this.#waiting || this.#pending.length > 0) {
      this.flush();
      await this.#waiting;
    }
  }

  #fail(batch: readonly PendingUnit<I, O>[], error: unknown, started: number): void {
    this.#stats.busyMs += performance.now() - started;
    this.#stats.failed += batch.length;
    for (const unit of batch) unit.reject(error);
  }

  #settle(batch: readonly PendingUnit<I, O>[], outcomes: Outcome<O>[], started: number): void {
    this.#stats.busyMs += performance.now() - started;
    this.#stats.commits += 1;
    this.#stats.largestBatch = Math.max(this.#stats.largestBatch, batch.length);
    for (const [i, unit] of batch.entries()) {
      const outcome = outcomes[i]!;
      if (outcome.ok) {
        this.#stats.committed += 1;
        unit.resolve(outcome.value);
      } else {
        this.#stats.failed += 1;
        unit.reject(outcome.error);
      }
    }
  }
}
