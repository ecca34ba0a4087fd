import { setTimeout as delay } from 'node:timers/promises';
import postgres from 'postgres';
import { DEFAULT_LOCK_TIMEOUT_MS, DEFAULT_POOL_MAX } from '../defaults.js';
import { runMigrations } from '../migrations.js';
import type { Dialect, Outcome, Params, StoreDb, TxWork, WriteOptions } from '../sql/executor.js';
import { StoreError } from '../store-error.js';
import { driverSessionAttrs, redactUrl } from '../store-url.js';
import { POSTGRES_MIGRATIONS } from './migrations.js';
import {
  isConnectionLost,
  isReadOnly,
  lostConnectionError,
  mapPostgresError,
  readOnlyError,
  untilBeginRejects,
  type WriteStage,
} from './postgres-errors.js';
import { PostgresTx, query, type Sql } from './postgres-tx.js';

/**
 * Advisory lock keys (`pg_advisory_xact_lock`), fixed numbers so every host takes the same lock.
 * FEED: taken first by every transaction that appends to the change feed, held to COMMIT, so feed
 * seqs become visible in the order they are taken (docs/store-backends.md, "The feed without
 * gaps"). MIGRATE: taken by each migration step and the schema_version bootstrap, so two hosts
 * starting at once apply each step once. ADMISSION: taken by each admission of a queued order,
 * so the backlog's count and the insert are one step for every process.
 */
export const FEED_LOCK_KEY = 72_085_001;
export const MIGRATE_LOCK_KEY = 72_085_002;
export const ADMISSION_LOCK_KEY = 72_085_003;

/** The channel feed-appending transactions `NOTIFY` (delivered at their commit, collapsed per transaction). */
export const FEED_CHANNEL = 'h2h_feed';

export const POSTGRES_DIALECT: Dialect = {
  name: 'postgres',
  greatest: (a, b) => `GREATEST(${a}, ${b})`,
  byteOrder: (expr) => `${expr} COLLATE "C"`,
  indexedBy: () => '',
  skipLocked: 'FOR UPDATE SKIP LOCKED',
  forUpdate: 'FOR UPDATE',
  schemaVersionSql: 'SELECT version FROM schema_version',
  setSchemaVersionSql: (version) => `UPDATE schema_version SET version = ${Math.trunc(version)}`,
  migrationLockSql: `SELECT pg_advisory_xact_lock(${MIGRATE_LOCK_KEY})`,
  admissionLockSql: `SELECT pg_advisory_xact_lock(${ADMISSION_LOCK_KEY})`,
};

/**
 * Most units of a savepoint batch in one transaction. Every unit that writes in a savepoint takes
 * a subtransaction id, and past 64 in one transaction PostgreSQL's per-backend cache of them
 * overflows, which slows every other session's snapshots while the transaction is open (a
 * well-known PostgreSQL pitfall). Only the slow path of {@link PostgresDb.writeBatch} uses
 * savepoints, in transactions of at most this many units.
 */
export const SAVEPOINT_UNITS_PER_TX = 50;

/**
 * Tries of a read, or of a write whose connection was lost or found its server read-only before
 * COMMIT, each on a new pool: with a primary and a standby, the first fails on the lost
 * primary, the second looks for a writable server (postgres.js goes round the URL's hosts), the
 * third is spare.
 */
export const CONNECTION_TRIES = 3;

/**
 * The wait before the second try, twice it before the third: a standby's promotion takes about
 * a second after the old primary is declared lost, and tries back to back would all come before it.
 */
export const RETRY_WAIT_MS = 250;

/**
 * How long a pool given up after a lost connection keeps its connections: enough for a
 * transaction under way on one that is well to commit (they take milliseconds); past it, what it
 * still holds fails as a lost connection (and a write runs again on the new pool).
 */
export const DRAIN_SECONDS = 2;

/** Thrown inside the fast path's transaction to roll it back when a unit failed. */
class UnitFailed extends Error {}

const isBusy = (error: unknown) => error instanceof StoreError && error.code === 'STORE_BUSY';

/** Whether an error inside a unit ended the whole transaction (a lost connection), not just the unit. */
const endsTransaction = isConnectionLost;

export interface OpenPostgresOptions {
  /** `postgres://user:password@host:port/db`; a password left out is taken from `PGPASSWORD`. */
  url: string;
  /** The wait for another transaction's lock (`lock_timeout`), ms. Default: {@link DEFAULT_LOCK_TIMEOUT_MS} (5 s). */
  lockTimeoutMs?: number;
  /** Refuse a database without an h2h-sync store (no `schema_version`): for commands that only read. */
  mustExist?: boolean;
  /** Connections of this process (`H2H_DB_POOL_MAX`). Default: {@link DEFAULT_POOL_MAX}. */
  poolMax?: number;
  /** Named in the connection (`application_name`), seen in `pg_stat_activity`. */
  applicationName?: string;
}

/**
 * The PostgreSQL store's database (docs/store-backends.md): a postgres.js pool; every write a
 * READ COMMITTED transaction whose first statement sets its `lock_timeout` and, when it appends to
 * the feed, takes the feed lock; `writeBatch` one transaction for the whole batch (the group
 * commit: one WAL flush per batch), run without savepoints first and, only when a unit fails,
 * again with a savepoint per unit so that the failed one alone is left out. Reads outside a
 * transaction see the last commit.
 */
export class PostgresDb implements StoreDb {
  readonly dialect = POSTGRES_DIALECT;
  readonly lockTimeoutMs: number;
  /** The URL with its password hidden, for messages. */
  readonly label: string;
  readonly #connect: () => Sql;
  #sql: Sql;
  /** Pools given up after a lost connection, draining ({@link renew}); `close()` waits for them. */
  readonly #draining = new Set<Promise<void>>();
  /** The feed's watchers, listening again on each new pool. */
  readonly #watchers = new Set<{ onCommit: () => void; unlisten?: () => Promise<void> }>();
  #closed = false;

  /** `connect` makes the pool; it is called again for a new pool after a lost connection. */
  constructor(connect: () => Sql, label: string, lockTimeoutMs: number) {
    this.#connect = connect;
    this.#sql = connect();
    this.label = label;
    this.lockTimeoutMs = lockTimeoutMs;
  }

  all<R>(sql: string, params?: Params): Promise<R[]> {
    return this.#read(async (pool) => [...(await query<R>(pool, sql, params))]);
  }

  get<R>(sql: string, params?: Params): Promise<R | undefined> {
    return this.#read(async (pool) => (await query<R>(pool, sql, params))[0]);
  }

  /** A read outside a transaction; one whose connection is lost runs again on a new pool. */
  async #read<T>(read: (pool: Sql) => Promise<T>): Promise<T> {
    for (let tries = 1; ; tries++) {
      if (tries > 1) await delay(RETRY_WAIT_MS * (tries - 1));
      const pool = this.#open();
      try {
        return await read(pool);
      } catch (error) {
        if (!isConnectionLost(error) || tries >= CONNECTION_TRIES || this.#closed) throw error;
        this.#renew(pool);
      }
    }
  }

  /**
   * Replaces the pool `failed` (unless that was done already) after one of its connections was
   * lost: new connections, through the URL's host list, for what comes next; the old pool is
   * ended after {@link DRAIN_SECONDS}, failing what it still holds as lost connections. Not the
   * lost connection alone: postgres.js 3.4 can keep a connection reset inside a transaction in a
   * state where the queries given to it never settle (porsager/postgres#1215; seen here, about
   * one write in twenty after its backends were killed), and it has no way to drop one connection.
   */
  #renew(failed: Sql): void {
    if (this.#sql !== failed || this.#closed) return;
    this.#sql = this.#connect();
    const drained = failed
      .end({ timeout: DRAIN_SECONDS })
      .catch(() => {})
      .finally(() => this.#draining.delete(drained));
    this.#draining.add(drained);
    for (const watcher of this.#watchers) void this.#listen(watcher);
  }

  run(sql: string, params?: Params): Promise<{ changes: number }> {
    return this.write((tx) => tx.run(sql, params));
  }

  exec(sql: string): Promise<void> {
    return this.write((tx) => tx.exec(sql));
  }

  write<T>(work: TxWork<T>, options: WriteOptions = {}): Promise<T> {
    return this.#begin(options, async (sql, lost) => {
      const tx = new PostgresTx(sql, POSTGRES_DIALECT, lost);
      try {
        return await work(tx);
      } finally {
        tx.open = false;
      }
    });
  }

  /**
   * The group commit's batch. Fast path: every unit straight on one transaction, without
   * savepoints (no subtransactions, no round trip per unit), committed once. When a unit fails,
   * that transaction is rolled back whole and the batch runs again on the slow path: each unit
   * in its own savepoint, so only the failing ones fail, in transactions of at most
   * {@link SAVEPOINT_UNITS_PER_TX} units. Units fail rarely (a constraint, a row lock past
   * `lock_timeout`), and a unit is a function of the database and its input, so running it again
   * after a rollback is safe.
   */
  async writeBatch<T>(units: ReadonlyArray<TxWork<T>>, options: WriteOptions = {}): Promise<Outcome<T>[]> {
    try {
      return await this.#begin(options, async (sql, lost) => {
        const outcomes: Outcome<T>[] = [];
        for (const unit of units) {
          const tx = new PostgresTx(sql, POSTGRES_DIALECT, lost);
          try {
            outcomes.push({ ok: true, value: await unit(tx) });
          } catch (error) {
            // A lost connection or a lock not taken in time (the same wait would come again on
            // the slow path, holding the feed lock twice as long): the batch fails as a whole,
            // nothing written, and may be tried again.
            if (endsTransaction(error) || isBusy(error) || isReadOnly(error)) throw error;
            throw new UnitFailed('a unit failed: the batch runs again with savepoints', { cause: error });
          } finally {
            tx.open = false;
          }
        }
        return outcomes;
      });
    } catch (error) {
      if (!(error instanceof UnitFailed)) throw error;
    }
    // Chunks commit one by one: when one fails as a whole, the chunks committed before it keep
    // their outcomes, and its units and the later ones (never run) fail, each on its own.
    const outcomes: Outcome<T>[] = [];
    for (let start = 0; start < units.length; start += SAVEPOINT_UNITS_PER_TX) {
      const chunk = units.slice(start, start + SAVEPOINT_UNITS_PER_TX);
      try {
        outcomes.push(...(await this.#savepointBatch(chunk, options)));
      } catch (error) {
        for (let i = start; i < units.length; i++) outcomes.push({ ok: false, error });
        break;
      }
    }
    return outcomes;
  }

  #savepointBatch<T>(units: ReadonlyArray<TxWork<T>>, options: WriteOptions): Promise<Outcome<T>[]> {
    return this.#begin(options, async (sql, lost) => {
      const outcomes: Outcome<T>[] = [];
      for (const unit of units) {
        try {
          const value = await sql.savepoint(async (sp) => {
            const tx = new PostgresTx(sp, POSTGRES_DIALECT, lost);
            try {
              return await unit(tx);
            } finally {
              tx.open = false;
            }
          });
          outcomes.push({ ok: true, value: value as T });
        } catch (error) {
          if (endsTransaction(error) || isReadOnly(error)) throw error;
          outcomes.push({ ok: false, error: mapPostgresError(error) });
        }
      }
      return outcomes;
    });
  }

  /**
   * `LISTEN h2h_feed` on a connection of its own (postgres.js reconnects it with backoff): every
   * feed-appending transaction of any process notifies it at commit; `onCommit` runs then, and
   * after each (re)connection of the listener, which may have missed notifications meanwhile.
   */
  async watchFeed(onCommit: () => void): Promise<() => Promise<void>> {
    const watcher: { onCommit: () => void; unlisten?: () => Promise<void> } = { onCommit };
    const pool = this.#open();
    const { unlisten } = await pool.listen(
      FEED_CHANNEL,
      () => onCommit(),
      () => onCommit(),
    );
    watcher.unlisten = unlisten;
    this.#watchers.add(watcher);
    // The pool was replaced while the listener started: it listens on the new one.
    if (pool !== this.#sql) void this.#listen(watcher);
    return async () => {
      this.#watchers.delete(watcher);
      await watcher.unlisten?.().catch(() => {});
    };
  }

  /** Listens for `watcher` on the current pool, after a renewal; tries again while it fails. */
  async #listen(watcher: { onCommit: () => void; unlisten?: () => Promise<void> }): Promise<void> {
    while (!this.#closed && this.#watchers.has(watcher)) {
      const pool = this.#sql;
      try {
        const { unlisten } = await pool.listen(
          FEED_CHANNEL,
          () => watcher.onCommit(),
          () => watcher.onCommit(),
        );
        watcher.unlisten = unlisten;
        return;
      } catch {
        if (pool === this.#sql) await new Promise((resolve) => setTimeout(resolve, 1_000).unref());
      }
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([this.#sql.end({ timeout: 5 }), ...this.#draining]);
  }

  /** The current pool (replaced after a lost connection), for the bootstrap before migrations. */
  get pool(): Sql {
    return this.#open();
  }

  #open(): Sql {
    if (this.#closed) throw new Error(`the store ${this.label} is closed`);
    return this.#sql;
  }

  /**
   * One write transaction. When its connection is lost before COMMIT (a server killed or
   * restarting, a failover), or its server is read-only (25006: a standby, or a fenced primary),
   * nothing was written: the transaction runs again, on a new pool ({@link renew}) whose connections
   * go through the URL's host list, up to {@link CONNECTION_TRIES} (waiting {@link RETRY_WAIT_MS} between them) times in all. A connection lost during COMMIT ends the write with
   * STORE_COMMIT_UNKNOWN: whether it was kept cannot be told, so it is left to the caller's retry.
   */
  async #begin<T>(
    options: WriteOptions,
    body: (sql: postgres.TransactionSql<Record<string, never>>, lost: () => void) => Promise<T>,
  ): Promise<T> {
    const timeout = Math.max(1, Math.trunc(options.lockTimeoutMs ?? this.lockTimeoutMs));
    // One round trip: the wait allowed, then (for a feed write) the feed lock and the notification that wakes the feed's readers on every host (sent at COMMIT only).
    const opening = `SET LOCAL lock_timeout = ${timeout}${options.feed ? `; SELECT pg_advisory_xact_lock(${FEED_LOCK_KEY}); NOTIFY ${FEED_CHANNEL}` : ''}`;
    for (let tries = 1; ; tries++) {
      if (tries > 1) await delay(RETRY_WAIT_MS * (tries - 1));
      const at: { stage: WriteStage } = { stage: 'opening' };
      const pool = this.#open();
      const lost = () => this.#renew(pool);
      try {
        return (await pool.begin(async (sql) => {
          try {
            await sql.unsafe(opening);
          } catch (error) {
            if (!isConnectionLost(error)) throw error;
            lost();
            return untilBeginRejects();
          }
          at.stage = 'body';
          const result = await body(sql, lost);
          at.stage = 'commit';
          return result;
        })) as T;
      } catch (error) {
        if (isReadOnly(error)) {
          // Every connection of the pool may be on that server (a primary turned standby behind
          // the same name, a fenced one): a new pool, whose connections look for a writable one.
          this.#renew(pool);
          if (tries < CONNECTION_TRIES && !this.#closed) continue;
          throw error instanceof StoreError ? error : readOnlyError(this.label, error);
        }
        if (!isConnectionLost(error)) throw mapPostgresError(error, this.label);
        this.#renew(pool);
        if (at.stage !== 'commit' && tries < CONNECTION_TRIES && !this.#closed) continue;
        throw lostConnectionError(this.label, at.stage, tries, error);
      }
    }
  }
}

/**
 * Creates `schema_version` (one row, version 0) in a database that has none, under the migration
 * lock, so two processes opening a new database at once create it once. With `mustExist`, a
 * database without it is refused instead: a command that only reads must not answer "no orders"
 * from the wrong database.
 */
async function bootstrap(sql: Sql, label: string, mustExist: boolean): Promise<void> {
  const [found] = await sql`SELECT to_regclass('schema_version') IS NOT NULL AS found`;
  if (found?.found) return;
  if (mustExist) {
    throw new StoreError(
      'STORE_NOT_FOUND',
      `no h2h-sync store in ${label}: set H2H_DB_URL to the deployment's store (a process that ` +
        'writes, such as the worker, creates it; `h2h-sync store migrate` copies a SQLite store there)',
    );
  }
  await sql.begin(async (tx) => {
    await tx.unsafe(`SELECT pg_advisory_xact_lock(${MIGRATE_LOCK_KEY})`);
    await tx.unsafe('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)');
    await tx.unsafe(
      'INSERT INTO schema_version (version) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM schema_version)',
    );
  });
}

/**
 * Opens a pool on the PostgreSQL database at `url` and brings its schema up to date
 * (postgres/migrations.ts). Throws a {@link StoreError} naming the database (never its password)
 * and the fix when it cannot be reached or was migrated by a newer h2h-sync.
 */
export async function openPostgresDb({
  url,
  lockTimeoutMs = DEFAULT_LOCK_TIMEOUT_MS,
  mustExist = false,
  poolMax = DEFAULT_POOL_MAX,
  applicationName = 'h2h-sync',
}: OpenPostgresOptions): Promise<PostgresDb> {
  const label = redactUrl(url);
  let connect: () => Sql;
  let db: PostgresDb;
  try {
    const sessionAttrs = driverSessionAttrs(url);
    connect = () =>
      postgres(url, {
        max: poolMax,
        // Every timestamp is BIGINT ms, safe as a number below 2^53; SUM and AVG of them come back
        // NUMERIC, read as a number too (no column is NUMERIC: amounts are DOUBLE PRECISION).
        types: {
          bigint: {
            to: 20,
            from: [20],
            parse: (x: string) => Number(x),
            serialize: (x: unknown) => String(x),
          },
          numeric: {
            to: 1700,
            from: [1700],
            parse: (x: string) => Number(x),
            serialize: (x: unknown) => String(x),
          },
        } as unknown as Record<string, never>,
        onnotice: () => {},
        fetch_types: false,
        // `read-write` becomes `primary` (store-url.ts, driverSessionAttrs); given as an option,
        // it overrides the URL's. Several hosts are tried in order until one fits.
        ...(sessionAttrs === undefined ? {} : { target_session_attrs: sessionAttrs }),
        connection: { application_name: applicationName },
      }) as unknown as Sql;
    db = new PostgresDb(connect, label, lockTimeoutMs);
  } catch (error) {
    // The driver's URL error carries the whole URL (its `input`): never passed on as a cause.
    throw new StoreError(
      'DATABASE_OPEN_FAILED',
      `${label} is not a valid PostgreSQL URL (${(error as Error).message}): check H2H_DB_URL, and percent-encode a password that holds / ? # @ or :`,
    );
  }
  try {
    await bootstrap(db.pool, label, mustExist);
    await runMigrations(db, POSTGRES_MIGRATIONS, label);
    return db;
  } catch (cause) {
    await db.close().catch(() => {});
    if (cause instanceof StoreError) throw cause;
    throw new StoreError(
      'DATABASE_OPEN_FAILED',
      `cannot open the order database ${label} (${(cause as Error).message}): check that the server ` +
        'is up and that H2H_DB_URL names a database this user may create tables in',
      { cause },
    );
  }
}
