// The store's backends for tests (docs/store-backends.md, "Tests on both backends"): a behaviour
// test of the store is written once, inside `describeEachBackend`, and runs against every backend
// `storeBackends()` gives. Tests of one backend's own mechanism (WAL, BEGIN IMMEDIATE, the write
// queue) stay outside, on that backend only.
import { describe, type TestContext } from 'node:test';
import { type OpenedStore, openStore } from '../../src/store/open-store.js';
import { parseStoreUrl, sqliteUrl } from '../../src/store/store-url.js';
import {
  type ManualClock,
  otherConnection,
  scheduleSettings,
  type TempStoreOptions,
  tempDbPath,
  tempStore,
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
  ): Promise<{ store: OpenedStore; url: string; clock: ManualClock }>;
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
  open(t: Pick<TestContext, 'after'>, url: string, options?: TempStoreOptions): Promise<OpenedStore>;
  /**
   * Takes the write lock of the database at `url` from a connection of its own, as another
   * process in a long write would (SQLite: `BEGIN IMMEDIATE`; PostgreSQL, step 4: the feed lock),
   * and keeps it until `release()` (at the latest when the test ends).
   */
  holdWriteLock(t: Pick<TestContext, 'after'>, url: string): Promise<HeldWriteLock>;
  /** The error code of a write that gave up waiting for another process's write lock. */
  readonly busyCode: string;
  /** The message of the driver's error when a statement breaks the unique constraint on `table.column`. */
  uniqueViolation(table: string, column: string): RegExp;
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
  busyCode: 'SQLITE_BUSY',
  uniqueViolation: (table, column) => new RegExp(`UNIQUE constraint failed: ${table}\\.${column}`),
};

/** Every backend built so far, in the order they run. */
const BUILT: readonly StoreBackend[] = [sqlite];
const NAMES: readonly StoreBackendName[] = ['sqlite', 'postgres'];

/**
 * The backends to run the store's tests on: every backend built (today SQLite only; step 4 of
 * issue 14 adds PostgreSQL), unless `H2H_TEST_STORE=sqlite|postgres` narrows it to one. A value
 * naming no backend, or one not built yet, throws, so a run never passes by testing nothing.
 */
export function storeBackends(env: NodeJS.ProcessEnv = process.env): StoreBackend[] {
  const wanted = env.H2H_TEST_STORE?.trim();
  if (!wanted) return [...BUILT];
  if (!NAMES.includes(wanted as StoreBackendName)) {
    throw new Error(
      `H2H_TEST_STORE must be one of ${NAMES.join(', ')} (or unset for all), got ${JSON.stringify(wanted)}`,
    );
  }
  const backend = BUILT.find((b) => b.name === wanted);
  if (!backend) {
    throw new Error(
      `H2H_TEST_STORE=${wanted}: that store backend is not built yet (issue 14, step 4); unset H2H_TEST_STORE or set it to ${BUILT.map((b) => b.name).join(' or ')}`,
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
  { now, balanceLowThreshold, lockTimeoutMs, ...overrides }: TempStoreOptions = {},
): Promise<OpenedStore> {
  const store = await openStore(url, scheduleSettings(overrides), {
    role: 'test',
    ...(now === undefined ? {} : { now }),
    ...(balanceLowThreshold === undefined ? {} : { balanceLowThreshold }),
    ...(lockTimeoutMs === undefined ? {} : { lockTimeoutMs }),
  });
  t.after(() => store.close());
  return store;
}

function sqlitePath(url: string): string {
  const location = parseStoreUrl(url);
  if (location.backend !== 'sqlite') throw new Error(`not a SQLite store URL: ${url}`);
  return location.path;
}
