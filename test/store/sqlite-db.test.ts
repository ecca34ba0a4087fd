import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { redactUrl } from '../../src/store/open-store.js';
import type { SqlExecutor } from '../../src/store/sql/executor.js';
import { openSqliteDb } from '../../src/store/sqlite/sqlite-db.js';
import { parseStoreUrl } from '../../src/store/store-url.js';
import { tempDbPath } from '../helpers/store.js';

const INSERT = `INSERT INTO orders (partner_ref, local_created_at, updated_at, submission_state)
  VALUES (@ref, 1, 1, 'pending')`;
const COUNT = 'SELECT COUNT(*) AS n FROM orders';

async function tempDb(t: Parameters<typeof tempDbPath>[0]) {
  const db = await openSqliteDb({ path: tempDbPath(t) });
  t.after(() => db.close());
  const count = async (ex: SqlExecutor = db) => (await ex.get<{ n: number }>(COUNT))!.n;
  return { db, count };
}

/** A promise the test resolves itself: the point where a transaction waits. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
}

test('one write transaction at a time: a second write waits for the first to commit, even while the first awaits', async (t) => {
  const { db, count } = await tempDb(t);
  const first = gate();
  const order: string[] = [];
  const a = db.write(async (tx) => {
    await tx.run(INSERT, { ref: 'A' });
    order.push('A wrote');
    await first.opened;
    assert.equal(await count(tx), 1, 'the transaction sees its own row');
    order.push('A commits');
  });
  const b = db.write(async (tx) => {
    order.push(`B starts, sees ${await count(tx)}`);
    await tx.run(INSERT, { ref: 'B' });
  });
  // A is open and waiting: reads outside it see the last commit only, and B has not started.
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(await count(), 0, 'a read outside the transaction does not see its row');
  assert.deepEqual(order, ['A wrote']);
  first.open();
  await Promise.all([a, b]);
  assert.deepEqual(order, ['A wrote', 'A commits', 'B starts, sees 1']);
  assert.equal(await count(), 2);
});

test('a transaction that throws is rolled back and the next one runs', async (t) => {
  const { db, count } = await tempDb(t);
  await assert.rejects(
    db.write(async (tx) => {
      await tx.run(INSERT, { ref: 'A' });
      throw new Error('boom');
    }),
    /boom/,
  );
  await db.write((tx) => tx.run(INSERT, { ref: 'B' }));
  assert.equal(await count(), 1);
  assert.equal(db.connection.inTransaction, false);
});

test('a transaction’s executor refuses statements once its transaction has ended', async (t) => {
  const { db } = await tempDb(t);
  let kept: SqlExecutor | undefined;
  await db.write(async (tx) => {
    kept = tx;
  });
  await assert.rejects(kept!.run(INSERT, { ref: 'late' }), /transaction that has ended/);
});

test('writeBatch: one transaction, a savepoint per unit; a failing unit loses only its own writes', async (t) => {
  const { db, count } = await tempDb(t);
  const unit =
    (ref: string, fail = false) =>
    async (tx: SqlExecutor) => {
      await tx.run(INSERT, { ref });
      if (fail) throw new Error(`no ${ref}`);
      return ref;
    };
  const outcomes = await db.writeBatch([unit('A'), unit('B', true), unit('C'), unit('A')]);
  const described = outcomes.map((o) => (o.ok ? o.value : (o.error as Error).message));
  assert.deepEqual(described.slice(0, 3), ['A', 'no B', 'C']);
  assert.match(described[3]!, /UNIQUE constraint failed/, 'a unit violating a constraint fails alone');
  assert.deepEqual(
    (await db.all<{ partner_ref: string }>('SELECT partner_ref FROM orders ORDER BY partner_ref')).map(
      (r) => r.partner_ref,
    ),
    ['A', 'C'],
  );
  assert.equal(await count(), 2);
});

test('writes queued behind each other commit in the order they were asked for', async (t) => {
  const { db } = await tempDb(t);
  await Promise.all(['1', '2', '3', '4'].map((ref) => db.write((tx) => tx.run(INSERT, { ref }))));
  assert.deepEqual(
    (await db.all<{ partner_ref: string }>('SELECT partner_ref FROM orders ORDER BY id')).map(
      (r) => r.partner_ref,
    ),
    ['1', '2', '3', '4'],
  );
});

test('a store URL is shown with its password hidden, whatever its shape', () => {
  assert.equal(redactUrl('postgresql://u:pw@h/db'), 'postgresql://u:***@h/db');
  assert.equal(redactUrl('sqlite:///var/x.db'), 'sqlite:///var/x.db');
  // Shapes the review found echoed whole: a slash in the password, a password in the query, no scheme.
  for (const url of [
    'postgres://user:pa/s3cret@host/db',
    'postgres://host/db?password=s3cret',
    'postgres://host/db?sslpassword=s3cret&sslmode=require',
    'user:s3cret@host:5432/db',
    'postgres:user:s3cret@host/db',
  ]) {
    assert.doesNotMatch(redactUrl(url), /s3cret|ss@/, url);
  }
  assert.equal(redactUrl('postgres://host/db?password=s3cret'), 'postgres://host/db?password=***');
});

test('store URLs: sqlite:///absolute, sqlite:relative, postgres://; anything else is refused', () => {
  assert.deepEqual(parseStoreUrl('sqlite:///tmp/a.db'), { backend: 'sqlite', path: '/tmp/a.db' });
  assert.deepEqual(parseStoreUrl('sqlite:rel/a.db'), {
    backend: 'sqlite',
    path: `${process.cwd()}/rel/a.db`,
  });
  assert.equal(parseStoreUrl('postgresql://h/db').backend, 'postgres');
  assert.throws(() => parseStoreUrl('mysql://h/db'), /is not a store URL/);
  assert.throws(() => parseStoreUrl('sqlite:'), /needs a file path/);
});

test('H2H_DB_URL and H2H_DB_PATH naming different stores is a start-up error naming both; the same store is fine', () => {
  assert.throws(
    () => loadConfig({ H2H_DB_URL: 'postgres://u:pw@h/db', H2H_DB_PATH: '/tmp/x.db' }),
    (error: unknown) =>
      error instanceof ConfigError &&
      error.message.includes('H2H_DB_URL (postgres://u:***@h/db)') &&
      error.message.includes('H2H_DB_PATH (/tmp/x.db)') &&
      !error.message.includes(':pw@'),
  );
  assert.equal(
    loadConfig({ H2H_DB_URL: 'sqlite:///tmp/x.db', H2H_DB_PATH: '/tmp/x.db' }).dbUrl,
    'sqlite:///tmp/x.db',
  );
  assert.equal(loadConfig({ H2H_DB_PATH: '/tmp/y.db' }).dbUrl, 'sqlite:///tmp/y.db');
  assert.throws(
    () => loadConfig({ H2H_DB_URL: 'postgress://u:pw@h/db' }),
    (error: unknown) =>
      error instanceof ConfigError &&
      /H2H_DB_URL="postgress:\/\/u:\*\*\*@h\/db" is not valid/.test(error.message) &&
      !error.message.includes(':pw@'),
  );
});
