import type { Database, Transaction } from 'better-sqlite3';
import { WriteLock } from '../store/write-lock.js';

/** Default of {@link GroupCommitOptions.maxBatchSize}. */
export const DEFAULT_MAX_BATCH_SIZE = 100;

export interface GroupCommitOptions {
  /**
   * The connection every unit of work writes through (the one the order store was opened on):
   * the outer transaction must be on it, or the units would not be savepoints inside it.
   */
  db: Database;
  /**
   * A batch is committed as soon as it holds this many units, without waiting for the next
   * turn of the event loop. Default: {@link DEFAULT_MAX_BATCH_SIZE}.
   */
  maxBatchSize?: number;
  /**
   * Longest wait for another process's write lock, in ms, spent on timers (the event loop keeps
   * running: BullMQ renews its job locks meanwhile); past it the batch fails with SQLITE_BUSY and
   * its jobs are retried by BullMQ. Default: the connection's `busy_timeout`.
   */
  lockTimeoutMs?: number;
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
  /** Milliseconds from each batch's first try for the write lock to its commit (or failure). */
  busyMs: number;
}

interface PendingUnit {
  work: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Group commit: many small write transactions share one fsync.
 *
 * Each {@link submit} queues a unit of work (for the worker, one event's
 * `applyOrderSnapshot`). The queued units run on the next turn of the event loop, or at once
 * when {@link GroupCommitOptions.maxBatchSize} are waiting, inside ONE outer `BEGIN IMMEDIATE`
 * transaction, each unit in its own savepoint (better-sqlite3 turns a nested transaction into
 * one). A unit that throws rolls back its own savepoint only, and only its promise rejects. The
 * promises settle after the outer COMMIT has returned, so a caller learns of success only once
 * its writes are durable (`synchronous=FULL`); if the COMMIT (or taking the write lock) fails,
 * every unit of the batch rejects with that error and nothing of the batch is written.
 *
 * SQLite's own "whole transaction" errors (SQLITE_FULL, SQLITE_IOERR …) roll back the outer
 * transaction from inside a unit: the batch then fails as a whole, as it must.
 */
export class GroupCommit {
  readonly #writeLock: WriteLock;
  readonly #maxBatchSize: number;
  readonly #db: Database;
  readonly #runBatch: Transaction<(units: readonly PendingUnit[]) => Outcome[]>;
  readonly #lockTimeoutMs: number | undefined;
  #pending: PendingUnit[] = [];
  #scheduled: NodeJS.Immediate | undefined;
  /** A batch waiting for the write lock; the next one runs after it, so batches commit in order. */
  #waiting: Promise<void> | undefined;
  readonly #stats: GroupCommitStats = {
    commits: 0,
    committed: 0,
    failed: 0,
    largestBatch: 0,
    busyMs: 0,
  };

  constructor({ db, maxBatchSize = DEFAULT_MAX_BATCH_SIZE, lockTimeoutMs }: GroupCommitOptions) {
    if (!Number.isInteger(maxBatchSize) || maxBatchSize < 1) {
      throw new RangeError(`maxBatchSize must be a whole number ≥ 1, got ${maxBatchSize}`);
    }
    this.#db = db;
    this.#maxBatchSize = maxBatchSize;
    this.#lockTimeoutMs = lockTimeoutMs;
    this.#writeLock = new WriteLock(db);
    // Called inside the outer transaction, a transaction function is a SAVEPOINT: the whole unit
    // rolls back on a throw, whatever it wrote before throwing.
    const inSavepoint = db.transaction((work: () => unknown) => work());
    this.#runBatch = db.transaction((units: readonly PendingUnit[]) =>
      units.map((unit): Outcome => {
        try {
          return { ok: true, value: inSavepoint(unit.work) };
        } catch (error) {
          // An error that ended the whole transaction cannot be confined to this unit.
          if (!this.#db.inTransaction) throw error;
          return { ok: false, error };
        }
      }),
    );
  }

  /**
   * Queues `work` to run in the next batch. Resolves with its result once the batch is
   * committed; rejects with its own error (its writes rolled back), or with the batch's error
   * when the batch could not be committed. `work` must be synchronous and write only through
   * the committer's connection.
   */
  submit<T>(work: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#pending.push({ work, resolve: resolve as (value: unknown) => void, reject });
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
   * The first try to take the write lock is made at once; while another process holds it, the
   * batch waits on timers and this returns, and later batches wait behind it.
   */
  flush(): void {
    if (this.#scheduled) clearImmediate(this.#scheduled);
    this.#scheduled = undefined;
    if (this.#waiting) return; // runs again when the waiting batch is done
    const batch = this.#pending;
    if (batch.length === 0) return;
    this.#pending = [];
    const started = performance.now();
    const committed = this.#writeLock.runAsync(this.#runBatch, [batch], this.#lockTimeoutMs);
    const settled = committed.then(
      (outcomes) => this.#settle(batch, outcomes, started),
      (error: unknown) => this.#fail(batch, error, started),
    );
    // Still waiting for the lock after the synchronous first try: hold later batches back.
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

  #fail(batch: readonly PendingUnit[], error: unknown, started: number): void {
    this.#stats.busyMs += performance.now() - started;
    this.#stats.failed += batch.length;
    for (const unit of batch) unit.reject(error);
  }

  #settle(batch: readonly PendingUnit[], outcomes: Outcome[], started: number): void {
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
