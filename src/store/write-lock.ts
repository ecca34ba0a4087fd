import type { Database, Transaction } from 'better-sqlite3';

/** Length of one wait for the lock inside SQLite before the store tries again itself. */
const LOCK_SLICE_MS = 2;
/** Upper bound of the random pause between two tries. */
const MAX_JITTER_MS = 2;

/** Longest pause between two tries of {@link WriteLock.runAsync}. */
const MAX_ASYNC_PAUSE_MS = 50;

const pause = new Int32Array(new SharedArrayBuffer(4));

const isBusy = (error: unknown): boolean => {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
};

/**
 * Runs write transactions as `BEGIN IMMEDIATE`, waiting for another process's write lock for up
 * to the connection's `busy_timeout` in total, in short jittered tries.
 *
 * Why not leave the wait to SQLite: its busy handler backs off to 100 ms sleeps, so a process
 * that writes back to back (a worker draining a backlog) keeps the lock through every gap and
 * the other process fails with SQLITE_BUSY after the whole timeout; measured here, two processes
 * applying 36,000 events each lost events that way. Trying every few ms shares the lock fairly.
 */
export class WriteLock {
  readonly #timeoutMs: number;
  readonly #shortWait: { run(): void };
  readonly #fullWait: { run(): void };

  constructor(db: Database) {
    this.#timeoutMs = db.pragma('busy_timeout', { simple: true }) as number;
    // Not prepared statements: SQLite applies `PRAGMA busy_timeout = N` when it compiles the
    // statement, so a prepared one set the timeout once, at prepare time, and its later runs
    // did not (measured: every try then waited the whole timeout inside SQLite).
    const short = `busy_timeout = ${Math.min(LOCK_SLICE_MS, this.#timeoutMs)}`;
    const full = `busy_timeout = ${this.#timeoutMs}`;
    this.#shortWait = { run: () => db.pragma(short) };
    this.#fullWait = { run: () => db.pragma(full) };
  }

  /** Runs `tx` immediately; inside an outer transaction it is a savepoint and never waits. */
  run<A extends unknown[], R>(tx: Transaction<(...args: A) => R>, ...args: A): R {
    const deadline = Date.now() + this.#timeoutMs;
    this.#shortWait.run();
    try {
      for (;;) {
        try {
          return tx.immediate(...args);
        } catch (error) {
          if (!isBusy(error) || Date.now() >= deadline) throw error;
          Atomics.wait(pause, 0, 0, Math.random() * MAX_JITTER_MS);
        }
      }
    } finally {
      this.#fullWait.run();
    }
  }

  /**
   * Like {@link run}, but between tries it waits on a timer instead of blocking the thread, for
   * up to `timeoutMs` in all (default: the connection's `busy_timeout`). For a process with other
   * duties on its event loop: the event worker must keep renewing its BullMQ job locks while
   * another process holds the store, or its jobs would be reported stalled. The first try runs
   * at once, in the caller's turn of the event loop.
   */
  async runAsync<A extends unknown[], R>(
    tx: Transaction<(...args: A) => R>,
    args: A,
    timeoutMs = this.#timeoutMs,
  ): Promise<R> {
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 0; ; attempt++) {
      this.#shortWait.run();
      try {
        return tx.immediate(...args);
      } catch (error) {
        if (!isBusy(error) || Date.now() >= deadline) throw error;
      } finally {
        this.#fullWait.run();
      }
      const backoff = Math.min(MAX_ASYNC_PAUSE_MS, 2 ** Math.min(attempt, 6));
      await new Promise((resolve) => setTimeout(resolve, backoff / 2 + Math.random() * (backoff / 2)));
    }
  }
}
