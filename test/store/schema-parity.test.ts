// The two backends' schemas are one schema (docs/store-backends.md, "Migrations"): both lists of
// steps end at the same version, and a migrated store has the same tables and columns on each.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LATEST_SCHEMA_VERSION } from '../../src/store/migrations.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { storeBackends } from '../helpers/store-backends.js';

type TypeClass = 'integer' | 'real' | 'text';
interface Column {
  table: string;
  column: string;
  type: TypeClass;
  notNull: boolean;
}

function sqliteClass(declared: string): TypeClass {
  if (/INT/i.test(declared)) return 'integer';
  if (/REAL|DOUB|FLOA/i.test(declared)) return 'real';
  return 'text';
}

function postgresClass(dataType: string): TypeClass {
  if (/integer|bigint|smallint/.test(dataType)) return 'integer';
  if (/double|real/.test(dataType)) return 'real';
  return 'text';
}

const byName = (a: Column, b: Column) => `${a.table}.${a.column}`.localeCompare(`${b.table}.${b.column}`);

test('both backends list their schema steps up to the same version, each numbered in order', () => {
  for (const steps of [SQLITE_MIGRATIONS, POSTGRES_MIGRATIONS]) {
    assert.equal(steps.at(-1)?.version, LATEST_SCHEMA_VERSION);
    steps.forEach((step, i) => {
      if (i > 0) assert.equal(step.version, steps[i - 1]!.version + 1, `step ${step.version}`);
    });
  }
});

// Besides: PostgreSQL's own schema_version and feed_counter (SQLite's are PRAGMA user_version and
// sqlite_sequence, left out too).
test('a migrated store has the same tables and columns (name, type class, nullability) on both backends', async (t) => {
  const [sqlite, postgres] = storeBackends({});
  const { store: lite } = await sqlite!.tempStore(t);
  const { store: pg } = await postgres!.tempStore(t);

  const liteColumns = await lite.db.all<{
    table: string;
    column: string;
    type: string;
    notnull: number;
    pk: number;
  }>(
    `SELECT m.name AS "table", c.name AS "column", c.type AS type, c."notnull" AS "notnull", c.pk AS pk
     FROM sqlite_master m, pragma_table_info(m.name) c
     WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`,
  );
  const pgColumns = await pg.db.all<{ table: string; column: string; type: string; nullable: string }>(
    `SELECT table_name AS "table", column_name AS "column", data_type AS type, is_nullable AS nullable
     FROM information_schema.columns
     WHERE table_schema = 'public' AND table_name NOT IN ('schema_version', 'feed_counter')`,
  );
  const fromSqlite: Column[] = liteColumns
    .map((c) => ({
      table: c.table,
      column: c.column,
      type: sqliteClass(c.type),
      // SQLite lets an INTEGER PRIMARY KEY be declared without NOT NULL; it is never null.
      notNull: c.notnull === 1 || c.pk > 0,
    }))
    .sort(byName);
  const fromPostgres: Column[] = pgColumns
    .map((c) => ({
      table: c.table,
      column: c.column,
      type: postgresClass(c.type),
      notNull: c.nullable === 'NO',
    }))
    .sort(byName);
  assert.ok(fromSqlite.length > 50, 'the schema was read');
  assert.deepEqual(fromPostgres, fromSqlite);
});
