import { EventEmitter } from 'node:events';
import { existsSync, type FSWatcher, mkdirSync, realpathSync, watch } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import BetterSqlite3, { type Database, type Statement } from 'better-sqlite3';
import { DEFAULT_LOCK_TIMEOUT_MS } from '../defaults.js';
import { runMigrations } from '../migrations.js';
import type {
  Dialect,
  Outcome,
  Params,
  SqlExecutor,
  StoreDb,
  TxWork,
  WriteOptions,
} from '../sql/executor.js';
import { StoreError } from '../store-error.js';
import { isBusy, WriteLock } from '../write-lock.js';
import { SQLITE_MIGRATIONS } from './migrations.js';

/**
 * How long after a change to the write-ahead log a feed watcher is called again: the commit the
 * change belongs to is visible once its fsync is done (about 1 ms on a local disk).
 */
const VISIBLE_AFTER_MS = 10;

export const SQLITE_DIALECT: Dialect = {
  name: 'sqlite',
  greatest: (a, b) => `MAX(${a}, ${b})`,
  byteOrder: (expr) => expr,
  indexedBy: (index) => `INDEXED BY ${index}`,
  skipLocked: '',
  forUpdate: '',
  schemaVersionSql: 'SELECT user_version AS version FROM pragma_user_version',
  setSchemaVersionSql: (version) => `PRAGMA user_version = ${Math.trunc(version)}`,
  migrationLockSql: '',
  admissionLockSql: '',
};

export interface OpenSqliteOptions {
  /** The SQLite file; its directory is created when missing. */
  path: string;
  /** How long a write waits for another connection's lock. Default: {@link DEFAULT_LOCK_TIMEOUT_MS}. */
  lockTimeoutMs?: number;
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
 * processes open a new store together on a loaded machine). Only at start-up.
 */
async function retryWhileBusy<T>(timeoutMs: number, step: () => T | Promise<T>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await step();
    } catch (error) {
      if (!isBusy(error) || Date.now() >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
}

/**
 * A connection to the store's SQLite file with the store's settings, without migrating it (for
 * {@link openSqliteDb}, and for tests and tools that inspect a file another process writes):
 *
 * - `journal_mode=WAL`: readers never block the one writer, and the receiver, worker, reconciler
 *   and CLI processes share the file.
 * - `busy_timeout`: a writer waits for another process's transaction instead of failing.
 * - `synchronous=FULL`: every commit is on disk before it returns. With WAL, `NORMAL` may lose
 *   the last commits on power loss, and what they record has often been acted on already: a
 *   webhook acknowledged with 2xx is never sent again, and a lost rejection would leave the order
 *   to be submitted again with its partner_ref, debiting a balance the reseller believes untouched.
 * - `foreign_keys=ON`: an event can only name an order that exists.
 * - `temp_store=MEMORY`: the savepoints' sub-journal (and temporary tables) in memory, not in
 *   temporary files.
 *
 * Throws a {@link StoreError} naming the path and the fix when the file cannot be opened or is
 * not a database.
 */
export function openSqliteConnection({
  path,
  lockTimeoutMs = DEFAULT_LOCK_TIMEOUT_MS,
  mustExist = false,
}: OpenSqliteOptions): Database {
  const absolute = resolve(path);
  if (mustExist && !existsSync(absolute)) {
    throw new StoreError(
      'STORE_NOT_FOUND',
      `no store at ${absolute}: set H2H_DB_URL (or H2H_DB_PATH) to the deployment's store`,
    );
  }
  try {
    mkdirSync(dirname(absolute), { recursive: true });
  } catch (cause) {
    throw openFailed(absolute, `cannot create the directory of the order database ${absolute}`, cause);
  }
  let db: Database | undefined;
  try {
    db = new BetterSqlite3(absolute, { timeout: lockTimeoutMs });
    return db;
  } catch (cause) {
    db?.close();
    throw openFailed(absolute, `cannot open the order database ${absolute}`, cause);
  }
}

function openFailed(absolute: string, what: string, cause: unknown): StoreError {
  if (cause instanceof StoreError) return cause;
  return new StoreError(
    'DATABASE_OPEN_FAILED',
    `${what} (${(cause as Error).message}): check that ${absolute} is a writable SQLite file on a ` +
      'local disk, or set H2H_DB_URL (or H2H_DB_PATH) to a new file',
    { cause },
  );
}

/** The pragmas every connection of the store sets (see {@link openSqliteConnection}). */
async function configure(db: Database, lockTimeoutMs: number): Promise<void> {
  const mode = await retryWhileBusy(lockTimeoutMs, () => db.pragma('journal_mode = WAL', { simple: true }));
  if (mode !== 'wal') {
    throw new Error(`journal_mode is ${String(mode)}, WAL is not supported on this file system`);
  }
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  // The savepoints' sub-journal (each unit of a group commit is a savepoint, docs/store.md) in
  // memory: at SQLite's default it spills to a temporary file past 64 KiB, and a batch of 50
  // applies then wrote about 30 pages a unit to it (two write() calls each). It only ever serves
  // a rollback inside the open transaction, never recovery, so durability is the same.
  db.pragma('temp_store = MEMORY');
}

/** Prepared statements of one connection, by SQL text. */
class StatementCache {
  readonly #db: Database;
  readonly #cache = new Map<string, Statement>();

  constructor(db: Database) {
    this.#db = db;
  }

  of(sql: string): Statement {
    let statement = this.#cache.get(sql);
    if (statement === undefined) {
      statement = this.#db.prepare(sql);
      this.#cache.set(sql, statement);
    }
    return statement;
  }
}

const all = (statement: Statement, params: Params | undefined) =>
  params === undefined ? statement.all() : statement.all(params);
const get = (statement: Statement, params: Params | undefined) =>
  params === undefined ? statement.get() : statement.get(params);
const run = (statement: Statement, params: Params | undefined) =>
  params === undefined ? statement.run() : statement.run(params);

/** The executor of one transaction on the write connection; refuses statements once it ended. */
class SqliteTx implements SqlExecutor {
  readonly dialect = SQLITE_DIALECT;
  readonly #statements: StatementCache;
  readonly #db: Database;
  open = true;

  constructor(db: Database, statements: StatementCache) {
    this.#db = db;
    this.#statements = statements;
  }

  #of(sql: string): Statement {
    if (!this.open)
      throw new Error('a statement on a transaction that has ended (use the store, not its tx)');
    return this.#statements.of(sql);
  }

  async all<R>(sql: string, params?: Params): Promise<R[]> {
    return all(this.#of(sql), params) as R[];
  }

  async get<R>(sql: string, params?: Params): Promise<R | undefined> {
    return get(this.#of(sql), params) as R | undefined;
  }

  async run(sql: string, params?: Params): Promise<{ changes: number }> {
    return { changes: run(this.#of(sql), params).changes };
  }

  async exec(sql: string): Promise<void> {
    if (!this.open) throw new Error('a statement on a transaction that has ended');
    this.#db.exec(sql);
  }
}

/**
 * The SQLite store's database (docs/store-backends.md, "The SQLite executor across awaits"):
 *
 * - one write connection behind a promise queue: one write transaction at a time in this process
 *   (all SQLite allows anyway), so a transaction that awaits between its statements never has
 *   another task's statements join it; `BEGIN IMMEDIATE` with {@link WriteLock}'s jittered,
 *   timer-based retry is the queue's entry step;
 * - a second connection, read-only (`query_only`), for reads outside transactions: WAL lets it
 *   read the last commit while a write transaction is open, and it never sees uncommitted rows;
 * - prepared statements cached by SQL text, per connection.
 *
 * Every write of the process must go through {@link write}, {@link writeBatch} or {@link run}:
 * a statement run on the write connection directly while a queued transaction is open would
 * join that transaction. `connection` is there for tests and tools that set up or inspect a
 * file while no store transaction is open.
 */
export class SqliteDb implements StoreDb {
  readonly dialect = SQLITE_DIALECT;
  /** The absolute path of the file. */
  readonly path: string;
  readonly lockTimeoutMs: number;
  readonly #write: Database;
  readonly #read: Database;
  readonly #writeStatements: StatementCache;
  readonly #readStatements: StatementCache;
  readonly #lock: WriteLock;
  readonly #commit: Statement;
  readonly #rollback: Statement;
  readonly #savepoint: Statement;
  readonly #release: Statement;
  readonly #rollbackTo: Statement;
  /** The last queued transaction, settled or not. */
  #tail: Promise<unknown> = Promise.resolve();
  /** Transactions queued or running. */
  #queued = 0;
  #closed = false;
  /** 'commit' after each committed transaction written with `feed: true` ({@link watchFeed}). */
  readonly #feedCommits = new EventEmitter();

  constructor(write: Database, read: Database, lockTimeoutMs: number) {
    this.#write = write;
    this.#read = read;
    this.path = write.name;
    this.lockTimeoutMs = lockTimeoutMs;
    this.#writeStatements = new StatementCache(write);
    this.#readStatements = new StatementCache(read);
    this.#lock = new WriteLock(write, lockTimeoutMs);
    this.#commit = write.prepare('COMMIT');
    this.#rollback = write.prepare('ROLLBACK');
    this.#savepoint = write.prepare('SAVEPOINT unit');
    this.#release = write.prepare('RELEASE unit');
    this.#rollbackTo = write.prepare('ROLLBACK TO unit');
  }

  /**
   * The write connection, for tests and SQLite-only tools: set-up and inspection while no store
   * transaction is open. Never for writes of a running store (they would join its open transaction).
   */
  get connection(): Database {
    return this.#write;
  }

  async all<R>(sql: string, params?: Params): Promise<R[]> {
    return all(this.#readStatements.of(sql), params) as R[];
  }

  async get<R>(sql: string, params?: Params): Promise<R | undefined> {
    return get(this.#readStatements.of(sql), params) as R | undefined;
  }

  run(sql: string, params?: Params): Promise<{ changes: number }> {
    return this.write((tx) => tx.run(sql, params));
  }

  exec(sql: string): Promise<void> {
    return this.write((tx) => tx.exec(sql));
  }

  write<T>(work: TxWork<T>, options: WriteOptions = {}): Promise<T> {
    return this.#enqueue(async () => {
      const foreignKeysOff = options.rebuildsTables === true && this.#foreignKeysOn();
      if (foreignKeysOff) this.#write.pragma('foreign_keys = OFF');
      try {
        await this.#lock.begin(options.lockTimeoutMs ?? this.lockTimeoutMs);
        const tx = new SqliteTx(this.#write, this.#writeStatements);
        try {
          const result = await work(tx);
          this.#commit.run();
          if (options.feed) this.#feedCommits.emit('commit');
          return result;
        } catch (error) {
          if (this.#write.inTransaction) this.#rollback.run();
          throw error;
        } finally {
          tx.open = false;
        }
      } finally {
        if (foreignKeysOff) this.#write.pragma('foreign_keys = ON');
      }
    });
  }

  writeBatch<T>(units: ReadonlyArray<TxWork<T>>, options: WriteOptions = {}): Promise<Outcome<T>[]> {
    return this.#enqueue(async () => {
      await this.#lock.begin(options.lockTimeoutMs ?? this.lockTimeoutMs);
      const outcomes: Outcome<T>[] = [];
      try {
        for (const unit of units) {
          const tx = new SqliteTx(this.#write, this.#writeStatements);
          this.#savepoint.run();
          try {
            const value = await unit(tx);
            this.#release.run();
            outcomes.push({ ok: true, value });
          } catch (error) {
            // An error that ended the whole transaction (SQLITE_FULL, SQLITE_IOERR …) cannot be
            // confined to this unit: the batch fails as a whole.
            if (!this.#write.inTransaction) throw error;
            this.#rollbackTo.run();
            this.#release.run();
            outcomes.push({ ok: false, error });
          } finally {
            tx.open = false;
          }
        }
        this.#commit.run();
      } catch (error) {
        if (this.#write.inTransaction) this.#rollback.run();
        throw error;
      }
      if (options.feed) this.#feedCommits.emit('commit');
      return outcomes;
    });
  }

  /**
   * This process's feed commits, at once; and every process's on this host: a commit appends to
   * the write-ahead log (`<file>-wal`), and a change to it, seen through the directory (the file
   * is created anew after the last connection closes), wakes the reader too. Those wake-ups also
   * come for commits that appended nothing to the feed, which costs the reader one read. Where
   * the file system reports no changes (some network and container file systems), the reader's
   * timer remains. The change is seen when the log is written, before the fsync after which
   * the commit is visible to readers: a second call follows {@link VISIBLE_AFTER_MS} later.
   */
  async watchFeed(onCommit: () => void): Promise<() => Promise<void>> {
    this.#feedCommits.on('commit', onCommit);
    // SQLite writes the log beside the real file, not beside a symbolic link to it.
    const real = existsSync(this.path) ? realpathSync(this.path) : this.path;
    const wal = `${basename(real)}-wal`;
    let watcher: FSWatcher | undefined;
    let again: NodeJS.Timeout | undefined;
    try {
      watcher = watch(dirname(real), { persistent: false }, (_event, name) => {
        if (name !== wal) return;
        onCommit();
        again ??= setTimeout(() => {
          again = undefined;
          onCommit();
        }, VISIBLE_AFTER_MS).unref();
      });
      // A watcher that fails later (the directory removed) leaves the timer.
      watcher.on('error', () => watcher?.close());
    } catch {
      // No change notification here: this process's commits and the timer remain.
    }
    return async () => {
      this.#feedCommits.off('commit', onCommit);
      watcher?.close();
      clearTimeout(again);
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#tail.catch(() => {});
    this.#read.close();
    this.#write.close();
  }

  #foreignKeysOn(): boolean {
    return this.#write.pragma('foreign_keys', { simple: true }) === 1;
  }

  /** Runs `transaction` once every transaction queued before it has settled; the first at once. */
  #enqueue<T>(transaction: () => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(new Error(`the store ${this.path} is closed`));
    const started = this.#queued === 0 ? transaction() : this.#tail.then(transaction);
    this.#queued += 1;
    const settled = started.then(
      () => {
        this.#queued -= 1;
      },
      () => {
        this.#queued -= 1;
      },
    );
    this.#tail = settled;
    return started;
  }
}

/**
 * Opens (or creates) the store's SQLite file with its two connections and brings its schema up to
 * date (sqlite/migrations.ts). Throws a {@link StoreError} naming the path and the fix when the
 * file cannot be opened, is not a database, or was migrated by a newer h2h-sync.
 */
export async function openSqliteDb(options: OpenSqliteOptions): Promise<SqliteDb> {
  const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
  const write = openSqliteConnection(options);
  let read: Database | undefined;
  try {
    await configure(write, lockTimeoutMs);
    read = new BetterSqlite3(write.name, { timeout: lockTimeoutMs });
    read.pragma('query_only = ON');
    const db = new SqliteDb(write, read, lockTimeoutMs);
    await retryWhileBusy(lockTimeoutMs, () => runMigrations(db, SQLITE_MIGRATIONS, write.name));
    return db;
  } catch (cause) {
    read?.close();
    write.close();
    throw openFailed(write.name, `cannot open the order database ${write.name}`, cause);
  }
}
