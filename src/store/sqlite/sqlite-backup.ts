import { existsSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { StoreError } from '../store-error.js';
import { openSqliteConnection } from './sqlite-db.js';

/**
 * `store backup PATH` (docs/store.md, "Backups"): a consistent copy of a SQLite store while the
 * apps write to it, through SQLite's online backup API (better-sqlite3's `db.backup`), pages in
 * steps so progress can be shown. A write by another process between two steps makes SQLite start
 * the copy again; after the first such restart the rest is copied in one step, one read
 * transaction, which WAL lets run beside the writers, so a busy store is still copied.
 */

/** Pages one step copies before a restart is seen (4 MiB at the store's 4 KiB pages). */
export const DEFAULT_BACKUP_STEP_PAGES = 1024;

/** The most pages better-sqlite3 takes in one step: everything left. */
const ALL_PAGES = 0x7fffffff;

export interface BackupProgress {
  totalPages: number;
  remainingPages: number;
  /** Times another process's write made SQLite start the copy again. */
  restarts: number;
}

export interface BackupSummary {
  /** The copy's absolute path. */
  path: string;
  bytes: number;
  pages: number;
  restarts: number;
  durationMs: number;
  /** The copy's schema version (`PRAGMA user_version`). */
  schemaVersion: number;
  /** Orders in the copy. */
  orders: number;
  /** The copy's `PRAGMA quick_check`: `ok`, or what it found. */
  quickCheck: string;
}

export interface BackupOptions {
  /** The store's file. */
  source: string;
  /** Where the copy goes; refused when it exists, unless `force`. */
  destination: string;
  force?: boolean;
  /** The wait for a lock of another process (`H2H_DB_LOCK_TIMEOUT_MS`). Default: 5 s. */
  lockTimeoutMs?: number;
  /** Pages a step copies. Default: {@link DEFAULT_BACKUP_STEP_PAGES}. */
  stepPages?: number;
  onProgress?: (progress: BackupProgress) => void;
}

/**
 * Copies the store at `source` to `destination`, through a file beside it renamed into place
 * once whole and checked, so `destination` is never a half copy. Throws a StoreError naming the
 * fix when `destination` exists (without `force`) or its directory does not.
 */
export async function backupSqliteStore({
  source,
  destination,
  force = false,
  lockTimeoutMs,
  stepPages = DEFAULT_BACKUP_STEP_PAGES,
  onProgress,
}: BackupOptions): Promise<BackupSummary> {
  const target = resolve(destination);
  if (existsSync(target) && !force) {
    throw new StoreError('BACKUP_EXISTS', `${target} exists: give a new PATH, or --force to replace it`);
  }
  if (!existsSync(dirname(target))) {
    throw new StoreError(
      'BACKUP_PATH_INVALID',
      `the directory ${dirname(target)} does not exist: create it, or give another PATH`,
    );
  }
  if (resolve(source) === target) {
    throw new StoreError('BACKUP_PATH_INVALID', `${target} is the store itself: give another PATH`);
  }
  const partial = `${target}.partial`;
  removeDatabase(partial);
  const started = performance.now();
  const db = openSqliteConnection({
    path: source,
    mustExist: true,
    ...(lockTimeoutMs === undefined ? {} : { lockTimeoutMs }),
  });
  let restarts = 0;
  let pages: number;
  try {
    let lastRemaining = Number.POSITIVE_INFINITY;
    ({ totalPages: pages } = await db.backup(partial, {
      progress: ({ totalPages, remainingPages }) => {
        // No progress since the last step (or a store grown since): the copy started again.
        if (remainingPages >= lastRemaining) restarts += 1;
        lastRemaining = remainingPages;
        onProgress?.({ totalPages, remainingPages, restarts });
        return restarts > 0 ? ALL_PAGES : stepPages;
      },
    }));
  } catch (error) {
    removeDatabase(partial);
    throw error;
  } finally {
    db.close();
  }
  const copy = new BetterSqlite3(partial, { fileMustExist: true });
  let checked: Pick<BackupSummary, 'schemaVersion' | 'orders' | 'quickCheck'>;
  try {
    checked = {
      quickCheck: String(copy.pragma('quick_check', { simple: true })),
      schemaVersion: copy.pragma('user_version', { simple: true }) as number,
      orders: (copy.prepare('SELECT COUNT(*) AS n FROM orders').get() as { n: number }).n,
    };
  } finally {
    copy.close();
  }
  if (checked.quickCheck !== 'ok') {
    removeDatabase(partial);
    throw new StoreError(
      'BACKUP_FAILED',
      `the copy failed its check (${checked.quickCheck}), so it was removed: run store backup again, and check the disk of ${target}`,
    );
  }
  if (force) removeDatabase(target);
  renameSync(partial, target);
  return {
    path: target,
    bytes: statSync(target).size,
    pages,
    restarts,
    durationMs: Math.round(performance.now() - started),
    ...checked,
  };
}

/** Removes a database file with its write-ahead log and shared-memory files, when they exist. */
function removeDatabase(path: string): void {
  for (const file of [path, `${path}-wal`, `${path}-shm`, `${path}-journal`]) rmSync(file, { force: true });
}
