import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { Database } from 'better-sqlite3';
import type { ProductLink } from '../../src/catalog/product-map.js';
import { loadConfig, reconcilerSettings } from '../../src/config/config.js';
import type { FailoverSettings } from '../../src/domain/attempts.js';
import { learnPace } from '../../src/reconciler/learn-pace.js';
import { type FeedEvent, isOrderEvent } from '../../src/store/feed.js';
import type { LocalOrder } from '../../src/store/local-order.js';
import { type OpenedStore, type OpenStoreOptions, openStore, sqliteUrl } from '../../src/store/open-store.js';
import type { PollScheduleSettings } from '../../src/store/order-claims.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { type ClaimingStore, withClaims } from '../../src/store/order-store.js';
import type { SqlExecutor } from '../../src/store/sql/executor.js';
import { openSqliteConnection } from '../../src/store/sqlite/sqlite-db.js';
import type { Order } from '../../src/upstream/model.js';

/** A path for a database file in a fresh temp directory, removed when the test ends. */
export function tempDbPath(t: Pick<TestContext, 'after'>): string {
  const dir = mkdtempSync(join(tmpdir(), 'h2h-store-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'var', 'h2h-sync.db');
}

/** A clock the test moves by hand; the store reads it through its `now` option. */
export interface ManualClock {
  now: () => number;
  advance: (ms: number) => void;
}

export function manualClock(start = Date.UTC(2026, 10, 1)): ManualClock {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
  };
}

/** The poll schedule of the default configuration (the config schema's defaults), with overrides. */
export function scheduleSettings(overrides: Partial<PollScheduleSettings> = {}): PollScheduleSettings {
  return { ...reconcilerSettings(loadConfig({})), ...overrides };
}

/** A store as the worker opens it: with the claims on orders. */
export type TestStore = ClaimingStore<OpenedStore>;

/**
 * `opened` with the claims of `settings` (`withClaims`), its first-poll plans written as the
 * reconciler's first pass writes them (learn-pace.ts): so that every write follows `settings`'
 * first-poll delay from the start, as in a worker whose reconciler runs.
 */
export async function withTestClaims(
  opened: OpenedStore,
  settings: PollScheduleSettings,
): Promise<TestStore> {
  const store = withClaims(opened, settings);
  await learnPace(store.pollPlans, store.claims.upstream, settings);
  return store;
}

/**
 * Writes `upstream`'s first-poll plans of `store`'s settings and the pace recorded so far, as
 * that upstream's reconciler does at its start (learn-pace.ts): for a test that writes another
 * upstream's orders as a store a worker on it has run would (the store's own upstream's plans
 * are written when it opens).
 */
export async function planFirstPolls(store: ClaimingStore, upstream: string): Promise<void> {
  await learnPace(store.pollPlans, upstream, store.claims.settings);
}

/** The options of {@link tempStore}: the poll schedule's overrides, and the store's clock and settings. */
export type TempStoreOptions = Partial<PollScheduleSettings> & {
  now?: () => number;
  balanceLowThreshold?: number;
  balanceDriftThreshold?: number;
  lockTimeoutMs?: number;
  failover?: FailoverSettings;
  productLinks?: readonly ProductLink[];
};

/**
 * An order store on a real SQLite file in a temp directory, closed when the test ends: the
 * default schedule with `overrides`, on a {@link manualClock} unless `now` is given; no
 * `balance.low` unless `balanceLowThreshold` is given. `db` is the store's SQLite write
 * connection (`store.sqlite`), for set-up and inspection between the store's calls, never while
 * one of them is running.
 */
export async function tempStore(
  t: Pick<TestContext, 'after'>,
  {
    now,
    balanceLowThreshold = 0,
    balanceDriftThreshold = 0,
    lockTimeoutMs,
    failover,
    productLinks,
    ...overrides
  }: TempStoreOptions = {},
): Promise<{ store: TestStore; db: Database; path: string; clock: ManualClock }> {
  const path = tempDbPath(t);
  const clock = manualClock();
  const store = await openTestStore(path, scheduleSettings(overrides), {
    now: now ?? clock.now,
    balanceLowThreshold,
    balanceDriftThreshold,
    ...(lockTimeoutMs === undefined ? {} : { lockTimeoutMs }),
    ...(failover === undefined ? {} : { failover }),
    ...(productLinks === undefined ? {} : { productLinks }),
  });
  t.after(() => store.close());
  return { store, db: store.sqlite!, path, clock };
}

/**
 * The store on the SQLite file `path` (created and migrated when new), with the default schedule
 * unless `settings` is given. The caller closes it.
 */
export async function openTestStore(
  path: string,
  settings: PollScheduleSettings = scheduleSettings(),
  options: OpenStoreOptions = {},
): Promise<TestStore> {
  return withTestClaims(await openStore(sqliteUrl(path), { role: 'test', ...options }), settings);
}

/**
 * A plain connection to the store file `path` (migrated first, when new), as another process
 * sees it: for tests that inspect or lock the file from outside the store. The caller closes it.
 */
export async function otherConnection(path: string, busyTimeoutMs?: number): Promise<Database> {
  await (await openTestStore(path)).close();
  return openSqliteConnection({
    path,
    ...(busyTimeoutMs === undefined ? {} : { lockTimeoutMs: busyTimeoutMs }),
  });
}

/** The order events of a page of the feed (its price changes and low balances left out), typed as such. */
export function orderEvents(events: FeedEvent[]) {
  return events.filter(isOrderEvent);
}

/** An upstream order snapshot as GET /orders/:ref would return it, with a status and overrides. */
export function snapshot(partnerRef: string, status: string, overrides: Partial<Order> = {}): Order {
  const successful = status === 'SUCCESS' || status === 'REFUNDED';
  return {
    invoice_number: `INV-${partnerRef}`,
    partner_ref: partnerRef,
    status,
    amount: 15_000,
    target: '12345678(2001)',
    product_name: 'Mobile Legends 86 Diamonds',
    product_code: 'ML86',
    serial_number: null,
    nickname: 'PlayerOne',
    message: status === 'FAILED' || status === 'REFUNDED' ? `${status.toLowerCase()} by provider` : null,
    created_at: '2026-11-01T00:00:00.000Z',
    success_at: successful ? '2026-11-01T00:01:00.000Z' : null,
    ...overrides,
  };
}

/** The next message of a child process, or a rejection naming its exit if it dies first. */
export function nextMessage<T>(child: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`child exited with ${code} before answering`));
    child.once('exit', onExit);
    child.once('message', (message) => {
      child.off('exit', onExit);
      resolve(message as T);
    });
  });
}

/** Whether every order of `refs` exists and passes `check` (read now, one by one). */
export async function everyOrder(
  store: Pick<OrderStore, 'queries'>,
  refs: readonly string[],
  check: (order: LocalOrder) => boolean,
): Promise<boolean> {
  for (const ref of refs) {
    const order = await store.queries.getOrder(ref);
    if (!order || !check(order)) return false;
  }
  return true;
}

/**
 * Takes a migrated store back to schema 31 inside the write transaction `tx`, as that schema left
 * it: undoes step 32 (one index of the open orders). Every rewind starts here, so a new step is
 * undone in one place.
 */
export async function rewindToSchema31(tx: SqlExecutor): Promise<void> {
  await tx.exec(`
    DROP INDEX orders_open;
    CREATE INDEX orders_upstream_due ON orders (upstream, next_poll_at, id);
    CREATE INDEX orders_next_poll_at ON orders (next_poll_at);
    CREATE INDEX orders_open_created ON orders (local_created_at) WHERE next_poll_at IS NOT NULL;
  `);
  await tx.exec(tx.dialect.setSchemaVersionSql(31));
}

/**
 * Takes a migrated store back to schema 30 inside the write transaction `tx`, as that schema left
 * it: {@link rewindToSchema31}, then undoes step 31 (a reconciler's indexes of its own upstream's
 * open orders).
 */
export async function rewindToSchema30(tx: SqlExecutor): Promise<void> {
  await rewindToSchema31(tx);
  await tx.exec(`
    DROP INDEX orders_upstream_due;
    CREATE INDEX orders_upstream_due ON orders (upstream, next_poll_at);
  `);
  await tx.exec(tx.dialect.setSchemaVersionSql(30));
}

/**
 * Takes a migrated store back to schema 29 inside the write transaction `tx`, as that schema left
 * it: {@link rewindToSchema30}, then undoes step 30 (the indexes of GET /v1/orders' filters).
 */
export async function rewindToSchema29(tx: SqlExecutor): Promise<void> {
  await rewindToSchema30(tx);
  await tx.exec(`
    DROP INDEX orders_submission_state;
    DROP INDEX orders_upstream_status;
  `);
  await tx.exec(tx.dialect.setSchemaVersionSql(29));
}

/**
 * Takes a migrated store back to schema 28 inside the write transaction `tx`, as that schema left
 * it: {@link rewindToSchema29}, then undoes step 29 (the balance drift: its ledger columns,
 * balance_observations and its two order indexes).
 */
export async function rewindToSchema28(tx: SqlExecutor): Promise<void> {
  await rewindToSchema29(tx);
  await tx.exec(`
    DROP INDEX orders_in_doubt;
    DROP INDEX orders_success_by_upstream;
    DROP TABLE balance_observations;
  `);
  for (const column of [
    'drift',
    'drift_unexplained',
    'drift_since',
    'drift_alerted',
    'audit_owed',
    'refunded',
  ]) {
    await tx.exec(`ALTER TABLE balance_ledger DROP COLUMN ${column}`);
  }
  await tx.exec(tx.dialect.setSchemaVersionSql(28));
}

/**
 * Takes a migrated store back to schema 27 inside the write transaction `tx`, as that schema left
 * it: {@link rewindToSchema28}, then undoes step 28 (the history retention's column and indexes).
 */
export async function rewindToSchema27(tx: SqlExecutor): Promise<void> {
  await rewindToSchema28(tx);
  await tx.exec(`
    DROP INDEX orders_history_prunable;
    DROP INDEX notify_deliveries_partner_ref;
    ALTER TABLE orders DROP COLUMN history_pruned_at;
  `);
  await tx.exec(tx.dialect.setSchemaVersionSql(27));
}

/**
 * Takes a migrated store back to schema 26 inside the write transaction `tx`, as that schema left
 * it: {@link rewindToSchema27}, then undoes step 27 (order_counts, its triggers,
 * orders_open_created, orders_success_final; PostgreSQL's orders_status on (status, id)).
 */
export async function rewindToSchema26(tx: SqlExecutor): Promise<void> {
  await rewindToSchema27(tx);
  if (tx.dialect.name === 'sqlite') {
    for (const change of ['insert', 'update', 'delete'])
      await tx.exec(`DROP TRIGGER orders_counted_${change}`);
  } else {
    await tx.exec('DROP TRIGGER orders_counted ON orders; DROP FUNCTION orders_counted()');
    await tx.exec('DROP INDEX orders_status; CREATE INDEX orders_status ON orders (status)');
  }
  await tx.exec('DROP TABLE order_counts; DROP INDEX orders_open_created; DROP INDEX orders_success_final');
  await tx.exec(tx.dialect.setSchemaVersionSql(26));
}

/**
 * Takes a migrated store back to schema 25 inside the write transaction `tx`, as that schema left
 * it: {@link rewindToSchema26}, then undoes step 26 (the first-poll plans per upstream: the
 * default upstream's are kept, keyed by product alone; order_events_upstream).
 */
export async function rewindToSchema25(tx: SqlExecutor): Promise<void> {
  await rewindToSchema26(tx);
  await tx.exec(`
    DROP INDEX order_events_upstream;
    CREATE TABLE poll_plans_v25 (
      product_code TEXT PRIMARY KEY, final_ms BIGINT NOT NULL, delivery_ms BIGINT NOT NULL,
      min_ms BIGINT NOT NULL, max_ms BIGINT, outlier_ms BIGINT, samples BIGINT NOT NULL,
      planned_at BIGINT NOT NULL
    );
    INSERT INTO poll_plans_v25 (product_code, final_ms, delivery_ms, min_ms, max_ms, outlier_ms, samples, planned_at)
      SELECT product_code, final_ms, delivery_ms, min_ms, max_ms, outlier_ms, samples, planned_at
      FROM poll_plans WHERE upstream = 'default';
    DROP TABLE poll_plans;
    ALTER TABLE poll_plans_v25 RENAME TO poll_plans;
  `);
  await tx.exec(tx.dialect.setSchemaVersionSql(25));
}

/**
 * Takes a migrated store back to schema 24 inside the write transaction `tx`, as that schema left
 * it: {@link rewindToSchema25}, then undoes step 25 (an order's attempts: its columns and indexes
 * on orders; the order_events foreign key it dropped is not put back).
 */
export async function rewindToSchema24(tx: SqlExecutor): Promise<void> {
  await rewindToSchema25(tx);
  await tx.exec('DROP INDEX orders_shop_ref');
  await tx.exec('DROP INDEX orders_completion');
  for (const column of ['shop_ref', 'attempt', 'attempts', 'route']) {
    await tx.exec(`ALTER TABLE orders DROP COLUMN ${column}`);
  }
  await tx.exec(tx.dialect.setSchemaVersionSql(24));
}

/**
 * Takes a migrated store back to schema 23 inside the write transaction `tx`, as that schema left
 * it: {@link rewindToSchema24}, then undoes step 24 (the catalog and the balance per upstream:
 * the default upstream's rows are kept, in the tables of one upstream).
 */
export async function rewindToSchema23(tx: SqlExecutor): Promise<void> {
  await rewindToSchema24(tx);
  await tx.exec(`
    CREATE TABLE catalog_categories_v23 (
      code TEXT PRIMARY KEY, name TEXT NOT NULL, sub_name TEXT NOT NULL, logo TEXT NOT NULL,
      is_active INTEGER NOT NULL
    );
    INSERT INTO catalog_categories_v23 (code, name, sub_name, logo, is_active)
      SELECT code, name, sub_name, logo, is_active FROM catalog_categories WHERE upstream = 'default';
    DROP TABLE catalog_categories;
    ALTER TABLE catalog_categories_v23 RENAME TO catalog_categories;
    CREATE TABLE catalog_products_v23 (
      id TEXT PRIMARY KEY, code TEXT NOT NULL UNIQUE, name TEXT NOT NULL, category_code TEXT NOT NULL,
      price DOUBLE PRECISION NOT NULL, is_active INTEGER NOT NULL, target TEXT
    );
    INSERT INTO catalog_products_v23 (id, code, name, category_code, price, is_active, target)
      SELECT id, code, name, category_code, price, is_active, target FROM catalog_products
      WHERE upstream = 'default';
    DROP TABLE catalog_products;
    ALTER TABLE catalog_products_v23 RENAME TO catalog_products;
    CREATE TABLE catalog_sync_v23 (id INTEGER PRIMARY KEY CHECK (id = 1), synced_at BIGINT NOT NULL);
    INSERT INTO catalog_sync_v23 (id, synced_at) SELECT 1, synced_at FROM catalog_sync WHERE upstream = 'default';
    DROP TABLE catalog_sync;
    ALTER TABLE catalog_sync_v23 RENAME TO catalog_sync;
    CREATE TABLE balance_ledger_v23 (
      id INTEGER PRIMARY KEY CHECK (id = 1), profile_balance DOUBLE PRECISION NOT NULL,
      profile_read_at BIGINT NOT NULL, debited DOUBLE PRECISION NOT NULL DEFAULT 0,
      credited DOUBLE PRECISION NOT NULL DEFAULT 0, unpriced INTEGER NOT NULL DEFAULT 0,
      low_alerted INTEGER NOT NULL DEFAULT 0
    );
    INSERT INTO balance_ledger_v23 (id, profile_balance, profile_read_at, debited, credited, unpriced, low_alerted)
      SELECT 1, profile_balance, profile_read_at, debited, credited, unpriced, low_alerted
      FROM balance_ledger WHERE upstream = 'default';
    DROP TABLE balance_ledger;
    ALTER TABLE balance_ledger_v23 RENAME TO balance_ledger;
  `);
  await tx.exec(tx.dialect.setSchemaVersionSql(23));
}

/**
 * Takes a migrated store back to schema 22 inside the write transaction `tx`, as that schema left
 * it: {@link rewindToSchema23}, then undoes step 23 (order_events.upstream, whose non-default
 * event ids go back to their `<name>/` prefix; orders_upstream_due). A test that rewinds further
 * undoes the older steps itself after this.
 */
export async function rewindToSchema22(tx: SqlExecutor): Promise<void> {
  await rewindToSchema23(tx);
  await tx.exec(`
    DROP INDEX orders_upstream_due;
    DROP INDEX order_events_source_upstream_event_id;
    UPDATE order_events SET event_id = upstream || '/' || event_id
      WHERE upstream <> 'default' AND event_id IS NOT NULL;
    ALTER TABLE order_events DROP COLUMN upstream;
    CREATE UNIQUE INDEX order_events_source_event_id
      ON order_events (source, event_id) WHERE event_id IS NOT NULL;
  `);
  await tx.exec(tx.dialect.setSchemaVersionSql(22));
}
