// The store's backends for tests (docs/store-backends.md, "Tests on both backends"): a behaviour
// test of the store is written once, inside `describeEachBackend`, and runs against every backend
// `storeBackends()` gives. Tests of one backend's own mechanism (WAL, BEGIN IMMEDIATE, the write
// queue) stay outside, on that backend only.
import { after, describe, type TestContext } from 'node:test';
import postgres from 'postgres';
import type { PostgresServer } from '../../src/dev/postgres-server.js';
import { openStore } from '../../src/store/open-store.js';
import { FEED_LOCK_KEY } from '../../src/store/postgres/postgres-db.js';
import { parseStoreUrl, sqliteUrl } from '../../src/store/store-url.js';
import { startTestPostgres } from './postgres.js';
import {
  type ManualClock,
  manualClock,
  otherConnection,
  scheduleSettings,
  type TempStoreOptions,
  type TestStore,
  tempDbPath,
  tempStore,
  withTestClaims,
} from './store.js';

export type StoreBackendName = 'sqlite' | 'postgres';

/** Another process's hold on the store's write lock, until `release()`. */
export interface HeldWriteLock {
  release(): Promise<void>;
}

export interface StoreBackend {
  readonly name: StoreBackendName;
  /**
   * A migrated, empty store on a database of its own, closed when the test ends: the default
   * schedule with the overrides of `options`, on a manual `clock` unless `options.now` is given.
   * `url` names the database, for a second store on it ({@link StoreBackend.open}).
   */
  tempStore(
    t: Pick<TestContext, 'after'>,
    options?: TempStoreOptions,
  ): Promise<{ store: TestStore; url: string; clock: ManualClock }>;
  /**
   * The URL of an empty database of its own, not migrated (SQLite: a file not yet created in a
   * temp directory), removed when the test ends: for tests whose processes race through opening
   * and migrating the store.
   */
  emptyUrl(t: Pick<TestContext, 'after'>): Promise<string>;
  /**
   * Another store on the database at `url`, as another process opens it (its own connections),
   * closed when the test ends; the default schedule with the overrides of `options`, on
   * `options.now` (default `Date.now`).
   */
  open(t: Pick<TestContext, 'after'>, url: string, options?: TempStoreOptions): Promise<TestStore>;
  /**
   * Takes the write lock of the database at `url` from a connection of its own, as another
   * process in a long write would (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: the feed lock),
   * and keeps it until `release()` (at the latest when the test ends).
   */
  holdWriteLock(t: Pick<TestContext, 'after'>, url: string): Promise<HeldWriteLock>;
  /**
   * Locks the order `partnerRef` of the database at `url` from a connection of its own, as
   * another process in a long write to it would, until `release()` (at the latest when the test
   * ends): every write to that order waits (SQLite: the write lock, which covers every row;
   * PostgreSQL: the row, `SELECT … FOR UPDATE`).
   */
  holdOrderLock(t: Pick<TestContext, 'after'>, url: string, partnerRef: string): Promise<HeldWriteLock>;
  /** The error code of a write that gave up waiting for another process's write lock. */
  readonly busyCode: string;
  /**
   * The message of the driver's error when a statement breaks the unique constraint on
   * `table.column` (the column's own, or the unique index `index` that starts with it).
   */
  uniqueViolation(table: string, column: string, index?: string): RegExp;
}

const sqlite: StoreBackend = {
  name: 'sqlite',
  async tempStore(t, options) {
    const { store, path, clock } = await tempStore(t, options);
    return { store, url: sqliteUrl(path), clock };
  },
  emptyUrl: async (t) => sqliteUrl(tempDbPath(t)),
  open: (t, url, options) => openOther(t, url, options),
  async holdWriteLock(t, url) {
    const connection = await otherConnection(sqlitePath(url));
    connection.exec('BEGIN IMMEDIATE');
    let held = true;
    const release = async () => {
      if (!held) return;
      held = false;
      connection.exec('COMMIT');
      connection.close();
    };
    t.after(release);
    return { release };
  },
  holdOrderLock(t, url) {
    return sqlite.holdWriteLock(t, url);
  },
  busyCode: 'SQLITE_BUSY',
  uniqueViolation: (table, column) => new RegExp(`UNIQUE constraint failed: ${table}\\.${column}`),
};

/**
 * The PostgreSQL backend: one private server per test file (started by the first test that asks,
 * stopped when the file's tests end), a template database migrated once, and a database of its
 * own per test, `CREATE DATABASE … TEMPLATE` (about 0.1 s), so no test sees another's rows.
 */
interface PostgresHost {
  server: PostgresServer;
  /** A connection to the server's own database, for CREATE DATABASE. */
  admin: postgres.Sql;
}

let host: Promise<PostgresHost> | undefined;
let databases = 0;
const TEMPLATE = 'h2h_template';

function databaseUrl(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

function postgresHost(): Promise<PostgresHost> {
  host ??= (async () => {
    const server = await startTestPostgres();
    const admin = postgres(server.url, { max: 1, onnotice: () => {} });
    await admin.unsafe(`CREATE DATABASE ${TEMPLATE}`);
    const template = await openStore(databaseUrl(server.url, TEMPLATE), { role: 'test' });
    await template.close();
    return { server, admin };
  })();
  return host;
}

// After the file's last test: the server of this file, if one was started.
after(async () => {
  if (host === undefined) return;
  const { server, admin } = await host;
  await admin.end({ timeout: 1 });
  await server.stop();
});

async function newDatabase(template: string | null): Promise<string> {
  const { server, admin } = await postgresHost();
  databases += 1;
  const name = `t_${process.pid}_${databases}`;
  await admin.unsafe(`CREATE DATABASE ${name}${template === null ? '' : ` TEMPLATE ${template}`}`);
  return databaseUrl(server.url, name);
}

const postgresBackend: StoreBackend = {
  name: 'postgres',
  async tempStore(t, options = {}) {
    const url = await newDatabase(TEMPLATE);
    const clock = manualClock();
    const store = await openOther(t, url, { ...options, now: options.now ?? clock.now });
    return { store, url, clock };
  },
  emptyUrl: () => newDatabase(null),
  open: (t, url, options) => openOther(t, url, options),
  async holdWriteLock(t, url) {
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    const connection = await sql.reserve();
    await connection.unsafe('BEGIN');
    await connection.unsafe(`SELECT pg_advisory_xact_lock(${FEED_LOCK_KEY})`);
    let held = true;
    const release = async () => {
      if (!held) return;
      held = false;
      await connection.unsafe('COMMIT');
      connection.release();
      await sql.end({ timeout: 1 });
    };
    t.after(release);
    return { release };
  },
  async holdOrderLock(t, url, partnerRef) {
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    const connection = await sql.reserve();
    await connection.unsafe('BEGIN');
    const [row] = await connection.unsafe('SELECT id FROM orders WHERE partner_ref = $1 FOR UPDATE', [
      partnerRef,
    ]);
    if (row === undefined) throw new Error(`no order ${partnerRef} to lock`);
    let held = true;
    const release = async () => {
      if (!held) return;
      held = false;
      await connection.unsafe('COMMIT');
      connection.release();
      await sql.end({ timeout: 1 });
    };
    t.after(release);
    return { release };
  },
  busyCode: 'STORE_BUSY',
  uniqueViolation: (table, column, index) =>
    new RegExp(`duplicate key value violates unique constraint "${index ?? `${table}_${column}_key`}"`),
};

/** Every backend, in the order they run. */
const BACKENDS: readonly StoreBackend[] = [sqlite, postgresBackend];

/**
 * The backends to run the store's tests on: SQLite and PostgreSQL, unless
 * `H2H_TEST_STORE=sqlite|postgres` narrows it to one. A value naming no backend throws, so a run
 * never passes by testing nothing.
 */
export function storeBackends(env: NodeJS.ProcessEnv = process.env): StoreBackend[] {
  const wanted = env.H2H_TEST_STORE?.trim();
  if (!wanted) return [...BACKENDS];
  const backend = BACKENDS.find((b) => b.name === wanted);
  if (!backend) {
    throw new Error(
      `H2H_TEST_STORE must be one of ${BACKENDS.map((b) => b.name).join(', ')} (or unset for all), got ${JSON.stringify(wanted)}`,
    );
  }
  return [backend];
}

/**
 * `describe(`${title} [${backend.name}]`, () => body(backend))` for each of {@link storeBackends}:
 * the tests `body` declares run once per backend, each test on a store of its own
 * (`backend.tempStore(t)`).
 */
export function describeEachBackend(title: string, body: (backend: StoreBackend) => void): void {
  for (const backend of storeBackends()) {
    describe(`${title} [${backend.name}]`, () => body(backend));
  }
}

async function openOther(
  t: Pick<TestContext, 'after'>,
  url: string,
  {
    now,
    balanceLowThreshold,
    balanceDriftThreshold,
    lockTimeoutMs,
    failover,
    productLinks,
    ...overrides
  }: TempStoreOptions = {},
): Promise<TestStore> {
  const opened = await openStore(url, {
    role: 'test',
    ...(now === undefined ? {} : { now }),
    ...(failover === undefined ? {} : { failover }),
    ...(balanceLowThreshold === undefined ? {} : { balanceLowThreshold }),
    ...(balanceDriftThreshold === undefined ? {} : { balanceDriftThreshold }),
    ...(lockTimeoutMs === undefined ? {} : { lockTimeoutMs }),
    ...(productLinks === undefined ? {} : { productLinks }),
  });
  const store = await withTestClaims(opened, scheduleSettings(overrides));
  t.after(() => store.close());
  return store;
}

function sqlitePath(url: string): string {
  const location = parseStoreUrl(url);
  if (location.backend !== 'sqlite') throw new Error(`not a SQLite store URL: ${url}`);
  return location.path;
}
