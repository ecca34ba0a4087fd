import { existsSync, statfsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { StoreError } from '../store-error.js';
import { openSqliteConnection } from './sqlite-db.js';

/**
 * `store vacuum` on SQLite (docs/store.md, "Vacuum"): `VACUUM` rewrites the file without its free
 * pages, giving their space back to the file system, then the write-ahead log, which the rewrite
 * filled, is truncated. SQLite reuses free pages for new rows by itself: this is for after a
 * first retention pass over years of history, or a lowered retention, not a routine.
 */

/** What the rewrite needs free on the store's file system, per byte of live data: a temporary copy and the write-ahead log. */
export const VACUUM_DISK_FACTOR = 2;

export interface VacuumPlan {
  path: string;
  /** The file and its write-ahead log, bytes. */
  bytes: number;
  /** Bytes in free pages: what VACUUM gives back (about). */
  freeBytes: number;
  /** What the rewrite needs free: {@link VACUUM_DISK_FACTOR} × the live data. */
  neededBytes: number;
  /** Free on the store's file system. */
  availableBytes: number;
}

export interface VacuumSummary {
  path: string;
  bytesBefore: number;
  bytesAfter: number;
  durationMs: number;
}

/** Size of the file with its write-ahead log. */
function fileBytes(path: string): number {
  const wal = `${path}-wal`;
  return statSync(path).size + (existsSync(wal) ? statSync(wal).size : 0);
}

/** What a vacuum of the store at `path` would give back and need, without changing anything. */
export function planSqliteVacuum(path: string): VacuumPlan {
  const absolute = resolve(path);
  const db = openSqliteConnection({ path: absolute, mustExist: true });
  try {
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    const pages = db.pragma('page_count', { simple: true }) as number;
    const free = db.pragma('freelist_count', { simple: true }) as number;
    const disk = statfsSync(dirname(absolute));
    return {
      path: absolute,
      bytes: fileBytes(absolute),
      freeBytes: free * pageSize,
      neededBytes: VACUUM_DISK_FACTOR * (pages - free) * pageSize,
      availableBytes: disk.bavail * disk.bsize,
    };
  } finally {
    db.close();
  }
}

/**
 * Rewrites the store at `plan.path` (`VACUUM`), then truncates its write-ahead log. Refuses, with
 * the amounts, when the file system has less free than the rewrite needs. VACUUM holds the write
 * lock throughout: another process's write waits for it, up to its own lock wait, then fails and
 * is retried (the worker's webhooks stay in Redis). Waits up to `lockTimeoutMs` to begin.
 */
export function vacuumSqliteStore(
  plan: VacuumPlan,
  { lockTimeoutMs }: { lockTimeoutMs?: number } = {},
): VacuumSummary {
  if (plan.availableBytes < plan.neededBytes) {
    const mb = (n: number) => `${(n / 1_048_576).toFixed(1)} MB`;
    throw new StoreError(
      'NOT_ENOUGH_DISK',
      `VACUUM needs about ${mb(plan.neededBytes)} free beside ${plan.path} (twice its live data: a temporary copy and the write-ahead log), and its file system has ${mb(plan.availableBytes)}: free some space, or copy the store elsewhere first (h2h-sync store backup PATH); nothing was changed`,
    );
  }
  const started = performance.now();
  const db = openSqliteConnection({
    path: plan.path,
    mustExist: true,
    ...(lockTimeoutMs === undefined ? {} : { lockTimeoutMs }),
  });
  try {
    db.exec('VACUUM');
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
  return {
    path: plan.path,
    bytesBefore: plan.bytes,
    bytesAfter: fileBytes(plan.path),
    durationMs: Math.round(performance.now() - started),
  };
}
