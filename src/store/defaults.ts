/**
 * The store backends' defaults, in a module that imports nothing: the config schema names them
 * without loading either database driver (better-sqlite3, postgres).
 */

/** Default wait for another process's write lock (`H2H_DB_LOCK_TIMEOUT_MS`). */
export const DEFAULT_LOCK_TIMEOUT_MS = 5000;
/** Default connections per process, PostgreSQL only (`H2H_DB_POOL_MAX`). */
export const DEFAULT_POOL_MAX = 10;
