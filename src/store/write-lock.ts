import type { Database, Statement } from 'better-sqlite3';

/** Length of one wait for the lock inside SQLite before the store tries again itself. */
const LOCK_SLICE_MS = 2;

/** Longest pause between two tries of {@link WriteLock.begin}. */
const MAX_PAUSE_MS = 50;

export const isBusy = (error: unknown): boolean => {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
};

/**
 * Starts write transactions as `BEGIN IMMEDIATE`, waiting for another process's write lock for up
 * to a timeout in short jittered tries, on timers: the entry step of the SQLite store's write
 * queue (sqlite/sqlite-db.ts). The event loop keeps running meanwhile (the event worker must keep
 * renewing its BullMQ job locks while another process holds the store).
 *
 * Why not leave the wait to SQLite: its busy handler backs off to 100 ms sleeps, so a process
 * that writes back to back (a worker draining a backlog) keeps the lock through every gap and
 * the other process fails with SQLITE_BUSY after the whole timeout; measured here, two processes
 * applying 36,000 events each lost events that way. Trying every few ms shares the lock fairly.
 */
export class WriteLock {
  readonly #db: Database;
  readonly #begin: Statement;
  readonly #short: string;
  readonly #full: string;

  /** `timeoutMs`: the connection's `busy_timeout`, restored after each try. */
  constructor(db: Database, timeoutMs: number) {
    this.#db = db;
    this.#begin = db.prepare('BEGIN IMMEDIATE');
    // Not prepared statements: SQLite applies `PRAGMA busy_timeout = N` when it compiles the
    // statement, so a prepared one set the timeout once, at prepare time, and its later runs
    // did not (measured: every try then waited the whole timeout inside SQLite).
    this.#short = `busy_timeout = ${Math.min(LOCK_SLICE_MS, timeoutMs)}`;
    this.#full = `busy_timeout = ${timeoutMs}`;
  }

  /**
   * Runs `BEGIN IMMEDIATE`, trying again while another connection holds the write lock, for up
   * to `timeoutMs` in all; past it, rejects with SQLITE_BUSY. The first try runs at once, in the
   * caller's turn of the event loop.
   */
  async begin(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 0; ; attempt++) {
      this.#db.pragma(this.#short);
      try {
        this.#begin.run();
        return;
      } catch (error) {
        if (!isBusy(error) || Date.now() >= deadline) throw error;
      } finally {
        this.#db.pragma(this.#full);
      }
      const backoff = Math.min(MAX_PAUSE_MS, 2 ** Math.min(attempt, 6));
      await new Promise((resolve) => setTimeout(resolve, backoff / 2 + Math.random() * (backoff / 2)));
    }
  }
}
