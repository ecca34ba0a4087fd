/**
 * What the store's parts run their SQL on (docs/store-backends.md, "Sync versus async, and the
 * interface"): the parts are written once, async, against these interfaces, and each backend
 * provides them (SQLite: sqlite/sqlite-db.ts; PostgreSQL: postgres/postgres-db.ts).
 *
 * SQL is written with named parameters, `@name`, bound from the `params` object (keys the
 * statement does not name are ignored). Write statements run only through a transaction's
 * executor ({@link StoreDb.write}, {@link StoreDb.writeBatch}) or {@link StoreDb.run}; a write
 * needing its id back writes `INSERT … RETURNING id` and reads it with `get`.
 */

/** The named values of a statement's `@name` parameters: an object whose keys are the names (a row type will do). */
export type Params = object;

/** The few SQL differences between the backends, by name (docs/store-backends.md, "How each SQLite piece maps"). */
export interface Dialect {
  readonly name: 'sqlite' | 'postgres';
  /** The larger of two values: SQLite's scalar `MAX(a, b)`, PostgreSQL's `GREATEST(a, b)`. */
  greatest(a: string, b: string): string;
  /**
   * A text expression for ORDER BY, compared by its bytes as SQLite's BINARY collation does:
   * `expr COLLATE "C"` on PostgreSQL, whose database collation follows the host's locale
   * (en_US.UTF-8 puts `a` before `B` and skips punctuation at first); `expr` itself on SQLite.
   * So both backends list text in one order.
   */
  byteOrder(expr: string): string;
  /** The index hint of a query, for SQLite's planner without ANALYZE figures (`INDEXED BY name`); empty on PostgreSQL. */
  indexedBy(index: string): string;
  /** Appended to a claim's inner SELECT: `FOR UPDATE SKIP LOCKED` on PostgreSQL, empty on SQLite (`BEGIN IMMEDIATE` excludes other writers). */
  readonly skipLocked: string;
  /** Appended to a read of a row the transaction then rewrites: `FOR UPDATE` on PostgreSQL, empty on SQLite. */
  readonly forUpdate: string;
  /** A query of the schema version as `version` (SQLite: `PRAGMA user_version`; PostgreSQL: table `schema_version`). */
  readonly schemaVersionSql: string;
  /** The statement that sets the schema version. */
  setSchemaVersionSql(version: number): string;
  /**
   * The first statement of each migration step's transaction, so two processes starting at once
   * apply a step once: PostgreSQL's migration advisory lock; empty on SQLite (`BEGIN IMMEDIATE`
   * is that lock already).
   */
  readonly migrationLockSql: string;
  /**
   * The first statement of a transaction that admits a queued order only while the backlog has
   * room (`OrderWriter.admitQueuedOrder`), so two admissions never both count the last place:
   * PostgreSQL's admission advisory lock; empty on SQLite (`BEGIN IMMEDIATE` is that lock).
   */
  readonly admissionLockSql: string;
}

export interface SqlExecutor {
  readonly dialect: Dialect;
  /** Every row of a query. */
  all<R>(sql: string, params?: Params): Promise<R[]>;
  /** The first row of a query, or undefined. */
  get<R>(sql: string, params?: Params): Promise<R | undefined>;
  /** Runs a statement; `changes` is the number of rows it wrote. */
  run(sql: string, params?: Params): Promise<{ changes: number }>;
  /** Runs a script of statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

export interface WriteOptions {
  /**
   * The transaction appends to the change feed. On PostgreSQL it then takes the feed lock first
   * (no seq gap a reader could see); on SQLite `BEGIN IMMEDIATE` serialises every writer anyway.
   */
  feed?: boolean;
  /**
   * Longest wait for another process's write lock, ms, spent on timers. Default: the store's
   * (`H2H_DB_LOCK_TIMEOUT_MS`).
   */
  lockTimeoutMs?: number;
  /**
   * SQLite only (migrations that rebuild a referenced table): foreign keys are off around the
   * transaction, which SQLite allows only outside one. Ignored by PostgreSQL.
   */
  rebuildsTables?: boolean;
}

/** What one unit of a {@link StoreDb.writeBatch} came to. */
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** One unit of work of a transaction: its statements run on `tx`, and only there. */
export type TxWork<T> = (tx: SqlExecutor) => Promise<T>;

/**
 * A store's database. Its own `all`/`get` read the last committed state, outside any
 * transaction; its `run` is a write transaction of one statement.
 */
export interface StoreDb extends SqlExecutor {
  /**
   * Runs `work` as one write transaction and commits it (SQLite: `BEGIN IMMEDIATE`; PostgreSQL:
   * READ COMMITTED, with the feed lock when `feed` is set); rolls back and rejects when `work`
   * throws. `work` must run its statements on `tx` only: a write of the same store started
   * inside it would wait for this one to end, for ever.
   */
  write<T>(work: TxWork<T>, options?: WriteOptions): Promise<T>;
  /**
   * The group commit's batch: every unit in ONE transaction, each in its own savepoint, so a
   * unit that throws rolls back only its own writes and fails only its own outcome. The outcomes
   * come after COMMIT has returned. An error that ends the whole transaction (taking the lock,
   * COMMIT, an I/O error, a lost connection) rejects the call: every unit failed. (PostgreSQL
   * runs the units without savepoints first and only after a unit failed with savepoints, in
   * transactions of at most 50 units: there a chunk that fails as a whole fails its own units and
   * the later ones, and the chunks committed before it keep their outcomes.)
   */
  writeBatch<T>(units: ReadonlyArray<TxWork<T>>, options?: WriteOptions): Promise<Outcome<T>[]>;
  /**
   * Calls `onCommit` after commits of transactions that appended to the feed (written with
   * `feed: true`), so a reader can read at once instead of at its next tick: on SQLite those of
   * every process on the host (this process's directly, the others' through changes to the
   * write-ahead log file); on PostgreSQL those of every process on the database (`LISTEN
   * h2h_feed`; the transactions `NOTIFY` it), and once more whenever the listening connection
   * (re)connects, since it may have missed some. Calls may be collapsed (one for several commits)
   * and may come for a commit that appended nothing; a reader must still read on a timer for
   * what a wake-up cannot reach (a file system that reports no changes, a lost notification).
   * Resolves to a function that stops it.
   */
  watchFeed(onCommit: () => void): Promise<() => Promise<void>>;
  /** Waits for the transactions started, then closes the connections. */
  close(): Promise<void>;
}
