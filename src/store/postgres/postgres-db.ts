import postgres from 'postgres';
import { DEFAULT_LOCK_TIMEOUT_MS, DEFAULT_POOL_MAX } from '../defaults.js';
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
import { redactUrl } from '../store-url.js';
import { POSTGRES_MIGRATIONS } from './migrations.js';
import { type CompiledSql, compileNamed, valuesOf } from './named-params.js';

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
 * SQLSTATEs after which the same transaction, tried again, may succeed: a lock not taken within
 * `lock_timeout` (55P03), a deadlock victim (40P01), a serialization failure (40001). They become
 * one {@link StoreError} `STORE_BUSY`, which callers retry as they retry SQLITE_BUSY.
 */
const BUSY_CODES = new Set(['55P03', '40P01', '40001']);

/** The store's error for a driver error: STORE_BUSY for a lock wait that gave up, else as it is. */
export function mapPostgresError(error: unknown): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && BUSY_CODES.has(code)) {
    return new StoreError(
      'STORE_BUSY',
      `the store was busy (${code}: ${(error as Error).message}): another process held a lock past ` +
        'the wait allowed (H2H_DB_LOCK_TIMEOUT_MS); the write was not made and may be tried again',
      { cause: error },
    );
  }
  return error;
}

/**
 * Most units of a savepoint batch in one transaction. Every unit that writes in a savepoint takes
 * a subtransaction id, and past 64 in one transaction PostgreSQL's per-backend cache of them
 * overflows, which slows every other session's snapshots while the transaction is open (a
 * well-known PostgreSQL pitfall). Only the slow path of {@link PostgresDb.writeBatch} uses
 * savepoints, in transactions of at most this many units.
 */
export const SAVEPOINT_UNITS_PER_TX = 50;

/** Thrown inside the fast path's transaction to roll it back when a unit failed. */
class UnitFailed extends Error {}

const isBusy = (error: unknown) => error instanceof StoreError && error.code === 'STORE_BUSY';

/** Whether an error inside a unit ended the whole transaction (a lost connection), not just the unit. */
function endsTransaction(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('CONNECTION_') || code.startsWith('08'));
}

type Sql = postgres.Sql<Record<string, never>>;
type AnySql = Sql | postgres.TransactionSql<Record<string, never>>;

/** Statements compiled from named to numbered parameters, by text (shared by every connection). */
const compiled = new Map<string, CompiledSql>();
function compile(sql: string): CompiledSql {
  let entry = compiled.get(sql);
  if (entry === undefined) {
    entry = compileNamed(sql);
    compiled.set(sql, entry);
  }
  return entry;
}

async function query<R>(
  sql: AnySql,
  text: string,
  params: Params | undefined,
): Promise<R[] & { count: number }> {
  const statement = compile(text);
  try {
    // biome-ignore lint/suspicious/noExplicitAny: the driver's parameter type is a union we do not narrow
    const values = valuesOf(statement, params) as any[];
    return (await sql.unsafe(statement.text, values, { prepare: true })) as unknown as R[] & {
      count: number;
    };
  } catch (error) {
    throw mapPostgresError(error);
  }
}

/** The executor of one transaction (or savepoint); refuses statements once it ended. */
class PostgresTx implements SqlExecutor {
  readonly dialect = POSTGRES_DIALECT;
  readonly #sql: AnySql;
  open = true;

  constructor(sql: AnySql) {
    this.#sql = sql;
  }

  #checked(): AnySql {
    if (!this.open)
      throw new Error('a statement on a transaction that has ended (use the store, not its tx)');
    return this.#sql;
  }

  async all<R>(sql: string, params?: Params): Promise<R[]> {
    return [...(await query<R>(this.#checked(), sql, params))];
  }

  async get<R>(sql: string, params?: Params): Promise<R | undefined> {
    return (await query<R>(this.#checked(), sql, params))[0];
  }

  async run(sql: string, params?: Params): Promise<{ changes: number }> {
    return { changes: (await query(this.#checked(), sql, params)).count };
  }

  async exec(sql: string): Promise<void> {
    try {
      await this.#checked().unsafe(sql);
    } catch (error) {
      throw mapPostgresError(error);
    }
  }
}

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
  readonly #sql: Sql;
  #closed = false;

  constructor(sql: Sql, label: string, lockTimeoutMs: number) {
    this.#sql = sql;
    this.label = label;
    this.lockTimeoutMs = lockTimeoutMs;
  }

  async all<R>(sql: string, params?: Params): Promise<R[]> {
    return [...(await query<R>(this.#open(), sql, params))];
  }

  async get<R>(sql: string, params?: Params): Promise<R | undefined> {
    return (await query<R>(this.#open(), sql, params))[0];
  }

  run(sql: string, params?: Params): Promise<{ changes: number }> {
    return this.write((tx) => tx.run(sql, params));
  }

  exec(sql: string): Promise<void> {
    return this.write((tx) => tx.exec(sql));
  }

  write<T>(work: TxWork<T>, options: WriteOptions = {}): Promise<T> {
    return this.#begin(options, async (sql) => {
      const tx = new PostgresTx(sql);
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
      return await this.#begin(options, async (sql) => {
        const outcomes: Outcome<T>[] = [];
        for (const unit of units) {
          const tx = new PostgresTx(sql);
          try {
            outcomes.push({ ok: true, value: await unit(tx) });
          } catch (error) {
            // A lost connection or a lock not taken in time (the same wait would come again on
            // the slow path, holding the feed lock twice as long): the batch fails as a whole,
            // nothing written, and may be tried again.
            if (endsTransaction(error) || isBusy(error)) throw error;
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
    return this.#begin(options, async (sql) => {
      const outcomes: Outcome<T>[] = [];
      for (const unit of units) {
        try {
          const value = await sql.savepoint(async (sp) => {
            const tx = new PostgresTx(sp);
            try {
              return await unit(tx);
            } finally {
              tx.open = false;
            }
          });
          outcomes.push({ ok: true, value: value as T });
        } catch (error) {
          if (endsTransaction(error)) throw error;
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
    const { unlisten } = await this.#open().listen(
      FEED_CHANNEL,
      () => onCommit(),
      () => onCommit(),
    );
    return async () => {
      await unlisten().catch(() => {});
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#sql.end({ timeout: 5 });
  }

  #open(): Sql {
    if (this.#closed) throw new Error(`the store ${this.label} is closed`);
    return this.#sql;
  }

  async #begin<T>(
    options: WriteOptions,
    body: (sql: postgres.TransactionSql<Record<string, never>>) => Promise<T>,
  ): Promise<T> {
    const timeout = Math.max(1, Math.trunc(options.lockTimeoutMs ?? this.lockTimeoutMs));
    try {
      return (await this.#open().begin(async (sql) => {
        // One round trip: the wait allowed, then (for a feed write) the feed lock and the
        // notification that wakes the feed's readers on every host (sent at COMMIT only).
        await sql.unsafe(
          `SET LOCAL lock_timeout = ${timeout}${options.feed ? `; SELECT pg_advisory_xact_lock(${FEED_LOCK_KEY}); NOTIFY ${FEED_CHANNEL}` : ''}`,
        );
        return body(sql);
      })) as T;
    } catch (error) {
      throw mapPostgresError(error);
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
  let sql: Sql;
  try {
    sql = postgres(url, {
      max: poolMax,
      // Every timestamp is BIGINT ms, safe as a number below 2^53; SUM and AVG of them come back
      // NUMERIC, read as a number too (no column is NUMERIC: amounts are DOUBLE PRECISION).
      types: {
        bigint: { to: 20, from: [20], parse: (x: string) => Number(x), serialize: (x: unknown) => String(x) },
        numeric: {
          to: 1700,
          from: [1700],
          parse: (x: string) => Number(x),
          serialize: (x: unknown) => String(x),
        },
      } as unknown as Record<string, never>,
      onnotice: () => {},
      fetch_types: false,
      connection: { application_name: applicationName },
    }) as unknown as Sql;
  } catch (error) {
    // The driver's URL error carries the whole URL (its `input`): never passed on as a cause.
    throw new StoreError(
      'DATABASE_OPEN_FAILED',
      `${label} is not a valid PostgreSQL URL (${(error as Error).message}): check H2H_DB_URL, and percent-encode a password that holds / ? # @ or :`,
    );
  }
  const db = new PostgresDb(sql, label, lockTimeoutMs);
  try {
    await bootstrap(sql, label, mustExist);
    await runMigrations(db, POSTGRES_MIGRATIONS, label);
    return db;
  } catch (cause) {
    await sql.end({ timeout: 1 }).catch(() => {});
    if (cause instanceof StoreError) throw cause;
    throw new StoreError(
      'DATABASE_OPEN_FAILED',
      `cannot open the order database ${label} (${(cause as Error).message}): check that the server ` +
        'is up and that H2H_DB_URL names a database this user may create tables in',
      { cause },
    );
  }
}
