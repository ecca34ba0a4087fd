import { existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import BetterSqlite3, { type Database } from 'better-sqlite3';
import { migrate } from './migrations.js';
import { StoreError } from './store-error.js';

/** Default wait for another process's write lock before SQLite gives up with `SQLITE_BUSY`. */
export const DEFAULT_BUSY_TIMEOUT_MS = 5000;

export interface OpenDatabaseOptions {
  /** The SQLite file; its directory is created when missing. */
  path: string;
  /** How long a write waits for another connection's lock. Default: {@link DEFAULT_BUSY_TIMEOUT_MS}. */
  busyTimeoutMs?: number;
  /**
   * Refuse to create the file: for commands that only read, where a new empty store would
   * silently answer "no orders" from the wrong place. Default: false.
   */
  mustExist?: boolean;
}

/**
 * Runs `step` again while SQLite answers SQLITE_BUSY, for up to `timeoutMs`. While another
 * process creates the same file, switches it to WAL or recovers its WAL index, SQLite can answer
 * SQLITE_BUSY at once, without calling the busy handler the timeout sets up (seen when several
 * processes open a new store together on a loaded machine). Only at start-up, so the short
 * synchronous waits between tries block nothing else; `migrate` is idempotent.
 */
function retryWhileBusy<T>(timeoutMs: number, step: () => T): T {
  const deadline = Date.now() + timeoutMs;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      return step();
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || Date.now() >= deadline) throw error;
      Atomics.wait(pause, 0, 0, 25);
    }
  }
}

/**
 * Opens (or creates) the order store's SQLite file and brings its schema up to date.
 *
 * - `journal_mode=WAL`: readers never block the one writer, and the receiver, worker, reconciler
 *   and CLI processes share the file.
 * - `busy_timeout`: a writer waits for another process's transaction instead of failing.
 * - `synchronous=FULL`: every commit is on disk before it returns. With WAL, `NORMAL` may lose
 *   the last commits on power loss, and what they record has often been acted on already: a
 *   webhook acknowledged with 2xx is never sent again, and a lost rejection would leave the order
 *   to be submitted again with its partner_ref, debiting a balance the reseller believes untouched.
 * - `foreign_keys=ON`: an event can only name an order that exists.
 *
 * Throws a {@link StoreError} naming the path and the fix when the file cannot be opened, is not
 * a database, or was migrated by a newer h2h-sync.
 */
export function openDatabase({
  path,
  busyTimeoutMs = DEFAULT_BUSY_TIMEOUT_MS,
  mustExist = false,
}: OpenDatabaseOptions): Database {
  const absolute = resolve(path);
  if (mustExist && !existsSync(absolute)) {
    throw new StoreError(
      'STORE_NOT_FOUND',
      `no store at ${absolute}: set H2H_DB_PATH to the deployment's store`,
    );
  }
  try {
    mkdirSync(dirname(absolute), { recursive: true });
  } catch (cause) {
    throw new StoreError(
      'DATABASE_OPEN_FAILED',
      `cannot create the directory of the order database ${absolute} (${(cause as Error).message}): ` +
        'set H2H_DB_PATH to a writable location',
      { cause },
    );
  }
  let db: Database | undefined;
  try {
    db = new BetterSqlite3(absolute, { timeout: busyTimeoutMs });
    const opened = db;
    const mode = retryWhileBusy(busyTimeoutMs, () => opened.pragma('journal_mode = WAL', { simple: true }));
    if (mode !== 'wal') {
      throw new Error(`journal_mode is ${String(mode)}, WAL is not supported on this file system`);
    }
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    retryWhileBusy(busyTimeoutMs, () => migrate(opened));
    return db;
  } catch (cause) {
    db?.close();
    if (cause instanceof StoreError) throw cause;
    throw new StoreError(
      'DATABASE_OPEN_FAILED',
      `cannot open the order database ${absolute} (${(cause as Error).message}): ` +
        'check that the path is a writable SQLite file on a local disk, or set H2H_DB_PATH to a new file',
      { cause },
    );
  }
}
