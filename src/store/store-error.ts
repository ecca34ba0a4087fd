/** The reasons the order store refuses something; each message names the fix. */
export type StoreErrorCode =
  /** The database file could not be created, opened or read as SQLite. */
  | 'DATABASE_OPEN_FAILED'
  /** A command that only reads found no store file (it never creates one). */
  | 'STORE_NOT_FOUND'
  /**
   * PostgreSQL: a lock was not taken within the wait allowed, or the transaction was a deadlock's
   * victim; nothing was written, and the same write may be tried again (SQLite's SQLITE_BUSY).
   */
  | 'STORE_BUSY'
  /**
   * PostgreSQL: no writable server answered within the write's tries (connections lost, or the
   * server read-only: a standby not yet promoted); nothing was written, and the write may be
   * tried again.
   */
  | 'STORE_UNAVAILABLE'
  /**
   * PostgreSQL: the connection was lost during COMMIT, so whether the write was kept cannot be
   * told; trying it again is safe only where the write is idempotent (events apply through the
   * state machine, an order is one per partner_ref); anything else is checked before a repeat.
   */
  | 'STORE_COMMIT_UNKNOWN'
  /** The file was migrated by a newer h2h-sync than this one. */
  | 'DATABASE_TOO_NEW'
  /** A snapshot without a status or without any order reference: it can never apply. */
  | 'INVALID_SNAPSHOT'
  /** A partner_ref that is empty or longer than the upstream allows. */
  | 'INVALID_PARTNER_REF'
  /** No local order has that partner_ref or invoice number. */
  | 'ORDER_NOT_FOUND'
  /** An API token without a name, or with a scope that does not exist. */
  | 'INVALID_TOKEN_NAME'
  | 'INVALID_SCOPE'
  /** No live API token has that id. */
  | 'TOKEN_NOT_FOUND'
  /** `store migrate`: the configured store is not a SQLite one, or `--to` not a PostgreSQL URL. */
  | 'NOT_SQLITE_SOURCE'
  | 'NOT_POSTGRES_TARGET'
  /** `store migrate`: the target database already has rows (it never merges). */
  | 'TARGET_NOT_EMPTY'
  /** `store migrate`: another process wrote to the SQLite file during the copy (nothing was written). */
  | 'SOURCE_CHANGED'
  /** `store migrate`: the tables, columns or row counts of the two stores differ (nothing was written). */
  | 'COPY_MISMATCH'
  /** `store backup`, `store vacuum`: a SQLite-only command on a PostgreSQL store (the message names the equivalent). */
  | 'NOT_SQLITE_STORE'
  /** `store backup`: the destination exists (without `--force`). */
  | 'BACKUP_EXISTS'
  /** `store backup`: the destination's directory does not exist, or it is the store itself. */
  | 'BACKUP_PATH_INVALID'
  /** `store backup`: the copy failed its `quick_check` (it was removed). */
  | 'BACKUP_FAILED'
  /** `store vacuum`: less free disk than the rewrite needs (nothing was changed). */
  | 'NOT_ENOUGH_DISK';

/**
 * The one error the store throws on purpose. `INVALID_SNAPSHOT` is permanent: a worker should
 * park the event rather than retry it; `STORE_BUSY` (PostgreSQL's lock time-outs and deadlocks),
 * `STORE_UNAVAILABLE` and `STORE_COMMIT_UNKNOWN` (a failover) are transient. SQLite's own errors (for example `SQLITE_BUSY`) and other driver errors pass
 * through unchanged, since they may be transient.
 */
export class StoreError extends Error {
  override readonly name = 'StoreError';

  constructor(
    readonly code: StoreErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
