import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { LATEST_SCHEMA_VERSION, runMigrations } from '../../src/store/migrations.js';
import { SQLITE_MIGRATIONS as MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { openSqliteDb, type SqliteDb } from '../../src/store/sqlite/sqlite-db.js';
import { StoreError } from '../../src/store/store-error.js';
import { tempDbPath } from '../helpers/store.js';

/** Matches the StoreError `code` whose message names the database path and the setting to fix. */
const refusal = (code: StoreError['code'], path: string) => (error: unknown) =>
  error instanceof StoreError &&
  error.code === code &&
  error.message.includes(path) &&
  error.message.includes('H2H_DB_PATH');

/** The store's database on `path`, closed when the test ends; `connection` to inspect it. */
async function opened(
  t: { after: (fn: () => unknown) => void },
  path: string,
  lockTimeoutMs?: number,
): Promise<SqliteDb> {
  const db = await openSqliteDb({ path, ...(lockTimeoutMs === undefined ? {} : { lockTimeoutMs }) });
  t.after(() => db.close());
  return db;
}

test('opening a new file creates its directory, turns on WAL, FULL sync, foreign keys, the busy timeout and the in-memory sub-journal', async (t) => {
  const path = tempDbPath(t);
  const db = (await opened(t, path, 1234)).connection;
  assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
  assert.equal(db.pragma('synchronous', { simple: true }), 2);
  assert.equal(db.pragma('foreign_keys', { simple: true }), 1);
  assert.equal(db.pragma('busy_timeout', { simple: true }), 1234);
  assert.equal(db.pragma('temp_store', { simple: true }), 2, 'temp_store = MEMORY');
  assert.equal(db.pragma('user_version', { simple: true }), LATEST_SCHEMA_VERSION);
});

test('migrations apply once: re-opening the file changes nothing and keeps the data', async (t) => {
  const path = tempDbPath(t);
  const firstDb = await openSqliteDb({ path });
  const first = firstDb.connection;
  first
    .prepare(
      `INSERT INTO orders (partner_ref, local_created_at, updated_at, submission_state)
       VALUES ('REF-1', 1, 1, 'pending')`,
    )
    .run();
  const schema = first.prepare('SELECT sql FROM sqlite_schema ORDER BY name').all();
  await firstDb.close();

  const againDb = await opened(t, path);
  const again = againDb.connection;
  assert.deepEqual(await runMigrations(againDb, MIGRATIONS, path), {
    from: LATEST_SCHEMA_VERSION,
    to: LATEST_SCHEMA_VERSION,
  });
  assert.deepEqual(again.prepare('SELECT sql FROM sqlite_schema ORDER BY name').all(), schema);
  assert.deepEqual(again.prepare('SELECT partner_ref FROM orders').all(), [{ partner_ref: 'REF-1' }]);
});

test('migration versions are 1, 2, 3 … in order, so user_version names the last one applied', () => {
  assert.deepEqual(
    MIGRATIONS.map((m) => m.version),
    MIGRATIONS.map((_, i) => i + 1),
  );
  assert.equal(LATEST_SCHEMA_VERSION, MIGRATIONS.length);
});

test('a database written by a newer h2h-sync is refused with a message that says what to do', async (t) => {
  const path = tempDbPath(t);
  const db = await openSqliteDb({ path });
  db.connection.pragma(`user_version = ${LATEST_SCHEMA_VERSION + 1}`);
  await db.close();
  await assert.rejects(openSqliteDb({ path }), refusal('DATABASE_TOO_NEW', path));
});

test('a file that is not SQLite is refused with its path and the fix', async (t) => {
  const path = tempDbPath(t);
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, 'this is not a database, just some text long enough to have a header........');
  await assert.rejects(openSqliteDb({ path }), refusal('DATABASE_OPEN_FAILED', path));
});

test('a path whose directory cannot be created is refused with its path and the fix', async (t) => {
  const blocker = tempDbPath(t);
  mkdirSync(join(blocker, '..'), { recursive: true });
  writeFileSync(blocker, '');
  const path = join(blocker, 'nested', 'h2h-sync.db');
  await assert.rejects(openSqliteDb({ path }), refusal('DATABASE_OPEN_FAILED', path));
});

test('a file of schema 3 is rebuilt to allow blocked submissions, keeping every order, event and index, and gets the audit index', async (t) => {
  const path = tempDbPath(t);
  mkdirSync(join(path, '..'), { recursive: true });
  const old = new BetterSqlite3(path);
  for (const migration of MIGRATIONS.filter((m) => m.version <= 3)) old.exec(migration.sql);
  old.pragma('user_version = 3');
  old
    .prepare(
      `INSERT INTO orders (partner_ref, status, local_created_at, updated_at, submission_state, next_poll_at, poll_leased_until)
       VALUES ('REF-1', 'PENDING', 1, 2, 'accepted', 30, 40), ('REF-2', NULL, 5, 5, 'rejected', NULL, NULL)`,
    )
    .run();
  old
    .prepare(
      `INSERT INTO order_events (partner_ref, source, status, received_at, applied_at, changed, reason)
       VALUES ('REF-1', 'create', 'PENDING', 1, 1, 1, 'initial')`,
    )
    .run();
  const before = old.prepare('SELECT * FROM orders ORDER BY id').all();
  old.close();

  const db = (await opened(t, path)).connection;

  assert.equal(db.pragma('user_version', { simple: true }), LATEST_SCHEMA_VERSION);
  assert.equal(db.pragma('foreign_keys', { simple: true }), 1, 'foreign keys are on again');
  assert.deepEqual(
    db.prepare('SELECT * FROM orders ORDER BY id').all(),
    before.map((row) => ({
      ...(row as object),
      request: null,
      blocked_code: null,
      blocked_detail: null,
      cancel_code: null,
      cancel_detail: null,
      // Written before step 16: sent at the latest when written; nothing open, nothing in doubt.
      first_sent_at: (row as { local_created_at: number }).local_created_at,
      create_in_doubt_at: null,
      lease_token: null,
      version: 0,
      debited_amount: null,
      // Written before step 20: every order is the default upstream's.
      upstream: 'default',
      // Written before step 25: every order is its shop's, on its first attempt, not routed.
      shop_ref: (row as { partner_ref: string }).partner_ref,
      attempt: 1,
      attempts: null,
      route: null,
      // Schema 28: no history pruned yet.
      history_pruned_at: null,
    })),
  );
  assert.deepEqual(
    db
      .prepare(
        "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'orders' AND sql IS NOT NULL ORDER BY name",
      )
      .all(),
    [
      { name: 'orders_audit' },
      // Schema 25: each upstream's completion times of a product, for the `fastest` routing.
      { name: 'orders_completion' },
      // Schema 28: the settled orders whose history the retention has not pruned since it changed.
      { name: 'orders_history_prunable' },
      // Schema 29: the creates in doubt, for the balance drift's in-doubt sum.
      { name: 'orders_in_doubt' },
      // Schema 22: invoice numbers are unique per upstream.
      { name: 'orders_invoice_upstream' },
      { name: 'orders_local_created_at' },
      // Schema 32: the open orders only, by upstream and due time: each upstream's due polls, oldest open order and due count.
      { name: 'orders_open' },
      { name: 'orders_queued' },
      // Schema 25: the shop's ref names one order whatever its attempts.
      { name: 'orders_shop_ref' },
      { name: 'orders_status' },
      // Schema 30: GET /v1/orders filtered by a submission state, newest first.
      { name: 'orders_submission_state' },
      // Schema 29: the settled SUCCESS orders by upstream and final time, for the audit the balance drift steers.
      { name: 'orders_success_by_upstream' },
      // Schema 27: the audit coverage of `status`, from the window's SUCCESS orders only.
      { name: 'orders_success_final' },
      // Schema 30: GET /v1/orders filtered by the upstream's status string, newest first.
      { name: 'orders_upstream_status' },
      { name: 'orders_waiting' },
    ],
  );
  db.prepare(
    "UPDATE orders SET submission_state = 'blocked', blocked_code = 'INVALID_API_KEY' WHERE partner_ref = 'REF-2'",
  ).run();
  assert.deepEqual(db.prepare('SELECT COUNT(*) AS n FROM order_events').get(), { n: 1 });
});

test('migration 12 records the debit of the orders accepted before it: their amount, else the catalog price', async (t) => {
  const path = tempDbPath(t);
  mkdirSync(join(path, '..'), { recursive: true });
  const old = new BetterSqlite3(path);
  for (const migration of MIGRATIONS.filter((m) => m.version <= 11)) old.exec(migration.sql);
  old.pragma('user_version = 11');
  old
    .prepare(
      `INSERT INTO catalog_products (id, code, name, category_code, price, is_active, target)
       VALUES ('11111111-1111-4111-8111-111111111111', 'ML86', 'ML 86', 'ML', 15000, 1, NULL)`,
    )
    .run();
  old
    .prepare(
      `INSERT INTO orders (partner_ref, product_code, amount, status, local_created_at, updated_at, submission_state)
       VALUES ('PRICED', 'ML86', 14000, 'PENDING', 1, 1, 'accepted'),
              ('AT-CATALOG', 'ML86', NULL, 'PENDING', 1, 1, 'accepted'),
              ('UNKNOWN', 'ZZ', NULL, 'PENDING', 1, 1, 'accepted'),
              ('REJECTED', 'ML86', NULL, NULL, 1, 1, 'rejected')`,
    )
    .run();
  old.close();

  const db = (await opened(t, path)).connection;
  assert.equal(db.pragma('user_version', { simple: true }), LATEST_SCHEMA_VERSION);
  assert.deepEqual(db.prepare('SELECT partner_ref, debited_amount FROM orders ORDER BY id').all(), [
    { partner_ref: 'PRICED', debited_amount: 14000 },
    { partner_ref: 'AT-CATALOG', debited_amount: 15000 },
    { partner_ref: 'UNKNOWN', debited_amount: null },
    { partner_ref: 'REJECTED', debited_amount: null },
  ]);
});

test("migration 19 drops the writers' pace histograms, keeps every order event with its event time unknown, and leaves the first-poll plans to the reconciler", async (t) => {
  const path = tempDbPath(t);
  mkdirSync(join(path, '..'), { recursive: true });
  const old = new BetterSqlite3(path);
  for (const migration of MIGRATIONS.filter((m) => m.version <= 18)) old.exec(migration.sql);
  old.pragma('user_version = 18');
  old.exec(`
    INSERT INTO order_pace (product_code, state, bucket, weight) VALUES ('ML86', 'SUCCESS', 100, 3);
    INSERT INTO order_pace_totals (product_code, state, total) VALUES ('ML86', 'SUCCESS', 3);
    INSERT INTO orders (partner_ref, local_created_at, updated_at, submission_state, poll_count)
      VALUES ('R1', 1, 1, 'accepted', 0);
    INSERT INTO order_events (partner_ref, source, event_id, status, payload, received_at, applied_at, changed, reason)
      VALUES ('R1', 'webhook', 'e1', 'SUCCESS', '{}', 5, 5, 1, 'applied');
  `);
  old.close();

  const db = (await opened(t, path)).connection;
  assert.equal(db.pragma('user_version', { simple: true }), LATEST_SCHEMA_VERSION);
  const tables = db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'order_pace%'")
    .all();
  assert.deepEqual(tables, []);
  assert.deepEqual(db.prepare('SELECT partner_ref, received_at, occurred_at FROM order_events').all(), [
    { partner_ref: 'R1', received_at: 5, occurred_at: null },
  ]);
  assert.deepEqual(db.prepare('SELECT * FROM poll_plans').all(), []);
});

test('migration 16 keeps every order, lets a submission be cancelled, and takes every order still open, queued ones too, as having a create in doubt', async (t) => {
  const path = tempDbPath(t);
  mkdirSync(join(path, '..'), { recursive: true });
  const old = new BetterSqlite3(path);
  for (const migration of MIGRATIONS.filter((m) => m.version <= 15)) old.exec(migration.sql);
  old.pragma('user_version = 15');
  const states = ['queued', 'pending', 'unknown', 'blocked', 'accepted', 'rejected'];
  const insert = old.prepare(
    `INSERT INTO orders (partner_ref, local_created_at, updated_at, submission_state, poll_leased_until)
     VALUES (@state, 10, 20, @state, 30)`,
  );
  for (const state of states) insert.run({ state });
  old.close();

  const db = (await opened(t, path)).connection;
  assert.equal(db.pragma('user_version', { simple: true }), LATEST_SCHEMA_VERSION);
  assert.deepEqual(
    db
      .prepare(
        'SELECT partner_ref, first_sent_at, create_in_doubt_at, poll_leased_until, lease_token, request FROM orders ORDER BY id',
      )
      .all(),
    states.map((state) => ({
      partner_ref: state,
      // A pump of before step 16 sent queued orders without marking them: they may be upstream.
      first_sent_at: 10,
      create_in_doubt_at: ['accepted', 'rejected'].includes(state) ? null : 20,
      poll_leased_until: 30,
      lease_token: null,
      request: null,
    })),
  );
  db.prepare(
    "UPDATE orders SET submission_state = 'cancelled', cancel_code = 'CANCELLED' WHERE id = 1",
  ).run();
  assert.deepEqual(
    db.prepare("SELECT COUNT(*) AS n FROM orders WHERE submission_state = 'cancelled'").get(),
    {
      n: 1,
    },
  );
});
