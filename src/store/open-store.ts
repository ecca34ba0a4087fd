import type { Database } from 'better-sqlite3';
import type { ProductLink } from '../catalog/product-map.js';
import type { FailoverSettings } from '../domain/attempts.js';
import { type OrderStore, openOrderStore } from './order-store.js';
import type { StoreDb } from './sql/executor.js';
import { StoreError } from './store-error.js';
import { parseStoreUrl } from './store-url.js';

export { redactUrl, sqliteUrl } from './store-url.js';

/** Which process opens the store: named in the connection (PostgreSQL's `application_name`). */
export type StoreRole = 'api' | 'worker' | 'cli' | 'reconciler' | 'bench' | 'test';

export interface OpenStoreOptions {
  /** The clock, in ms since the epoch. Default: `Date.now`. */
  now?: () => number;
  role?: StoreRole;
  /** The wait for another process's write lock (`H2H_DB_LOCK_TIMEOUT_MS`). Default: 5 s. */
  lockTimeoutMs?: number;
  /**
   * For commands that only read: refuse to create the store (a SQLite file must exist), where a
   * new empty store would silently answer "no orders" from the wrong place. Default: false.
   */
  mustExist?: boolean;
  /** BALANCE_LOW_THRESHOLD (see `openOrderStore`). Default: 0 (off). */
  balanceLowThreshold?: number;
  /** BALANCE_DRIFT_THRESHOLD (see `openOrderStore`). Default: 0 (off). */
  balanceDriftThreshold?: number;
  /** When an order goes on to its next upstream (`routingSettings(config).failover`; see `openOrderStore`). */
  failover?: FailoverSettings;
  /** The product map's links (see `openOrderStore`). Default: none. */
  productLinks?: readonly ProductLink[];
  /** PostgreSQL only: connections of this process (`H2H_DB_POOL_MAX`). Default: 10. */
  poolMax?: number;
}

/** An open store: the {@link OrderStore}, its backend, and `close()`. */
export interface OpenedStore extends OrderStore {
  readonly backend: 'sqlite' | 'postgres';
  /** The database the parts run on (sql/executor.ts). */
  readonly db: StoreDb;
  /**
   * SQLite only, for tests and SQLite-only tools: the write connection, for set-up and inspection
   * while none of the store's transactions is open (a write through it while one is open would
   * join that transaction). Undefined on other backends.
   */
  readonly sqlite: Database | undefined;
  /** Waits for the transactions started, then closes the store's connections. */
  close(): Promise<void>;
}

/**
 * Opens the store at `url` (`H2H_DB_URL`: `sqlite://…` or `postgres://…`) and brings its schema
 * up to date. Throws a StoreError naming the store (never a password) and the fix.
 */
export async function openStore(
  url: string,
  {
    now,
    role,
    lockTimeoutMs,
    mustExist,
    balanceLowThreshold,
    balanceDriftThreshold,
    failover,
    productLinks,
    poolMax,
  }: OpenStoreOptions = {},
): Promise<OpenedStore> {
  let location: ReturnType<typeof parseStoreUrl>;
  try {
    location = parseStoreUrl(url);
  } catch (cause) {
    throw new StoreError('DATABASE_OPEN_FAILED', `${(cause as Error).message} (H2H_DB_URL)`, { cause });
  }
  const common = {
    ...(lockTimeoutMs === undefined ? {} : { lockTimeoutMs }),
    ...(mustExist === undefined ? {} : { mustExist }),
  };
  // Only the driver of this store's backend is loaded: a CLI command on a SQLite store never
  // loads postgres, and a process on PostgreSQL never needs better-sqlite3's native module.
  let db: StoreDb;
  let sqlite: Database | undefined;
  if (location.backend === 'postgres') {
    const { openPostgresDb } = await import('./postgres/postgres-db.js');
    db = await openPostgresDb({
      url: location.url,
      applicationName: `h2h-sync ${role ?? 'cli'}`,
      ...common,
      ...(poolMax === undefined ? {} : { poolMax }),
    });
  } else {
    const { openSqliteDb } = await import('./sqlite/sqlite-db.js');
    const sqliteDb = await openSqliteDb({ path: location.path, ...common });
    db = sqliteDb;
    sqlite = sqliteDb.connection;
  }
  const store = openOrderStore(db, {
    ...(now === undefined ? {} : { now }),
    ...(balanceLowThreshold === undefined ? {} : { balanceLowThreshold }),
    ...(balanceDriftThreshold === undefined ? {} : { balanceDriftThreshold }),
    ...(failover === undefined ? {} : { failover }),
    ...(productLinks === undefined ? {} : { productLinks }),
  });
  return {
    ...store,
    backend: location.backend,
    db,
    sqlite,
    close: () => db.close(),
  };
}
