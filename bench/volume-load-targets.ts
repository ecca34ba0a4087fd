// The two backends of the volume bench's bulk loader (volume-loader.ts): how a copied row goes in
// (a prepared statement on SQLite, COPY on PostgreSQL), and what is set aside for the copy and
// put back after it. For the copy the copied tables' indexes (but those of constraints) are
// dropped and built again from their own SQL after it (one sort per index instead of a B-tree
// insert per row), and their triggers, schema 27's `orders_counted*` which keep `order_counts`,
// are dropped (SQLite) or disabled (PostgreSQL): the copies' counts are added in one statement
// over the same key (`orderCountKey`) instead of one upsert of a counter row per order (on
// PostgreSQL, each a new version of the same row in one long transaction). A trigger the loader
// does not know of stops the load rather than being skipped.
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import Database from 'better-sqlite3';
import postgres from 'postgres';
import { orderCountKey } from '../src/store/sql/shared-migrations.js';

export type Row = Record<string, unknown>;

/** The tables whose rows belong to one order, in the order they are copied, with their id and time columns. */
export const PER_ORDER = [
  {
    table: 'orders',
    id: 'id',
    times: [
      'local_created_at',
      'updated_at',
      'last_polled_at',
      'next_poll_at',
      'stuck_at',
      'final_at',
      'first_sent_at',
      'create_in_doubt_at',
      'poll_leased_until',
    ],
  },
  { table: 'order_events', id: 'id', times: ['received_at', 'occurred_at', 'applied_at'] },
  { table: 'feed_events', id: 'seq', times: ['timestamp'] },
  { table: 'notify_deliveries', id: 'id', times: ['requested_at'] },
] as const;

export type TableName = (typeof PER_ORDER)[number]['table'];

const TABLE_LIST = PER_ORDER.map((t) => `'${t.table}'`).join(', ');

/** The triggers on the copied tables whose work `ORDER_COUNTS_OF_COPIES` does (schema 27's). */
const COUNTED = /^orders_counted(_insert|_delete|_update)?$/;

/** What the copy's insert triggers would have added to `order_counts`: the copies, counted by their place. */
function orderCountsOfCopies(firstCopiedOrder: number): string {
  const key = orderCountKey('').join(', ');
  return `INSERT INTO order_counts (upstream, status_key, submission_state, open, stuck, n)
    SELECT ${key}, COUNT(*) FROM orders WHERE id >= ${Math.trunc(firstCopiedOrder)} GROUP BY ${key}
    ON CONFLICT (upstream, status_key, submission_state, open, stuck) DO UPDATE SET n = order_counts.n + excluded.n`;
}

function checkTriggers(names: string[]): void {
  const unknown = names.filter((name) => !COUNTED.test(name));
  if (unknown.length > 0) {
    throw new Error(
      `trigger(s) ${unknown.join(', ')} on a copied table: the loader disables triggers for the copy and redoes only order_counts' (bench/volume-load-targets.ts)`,
    );
  }
}

/** What the copy needs of a backend. */
export interface Target {
  all(sql: string): Promise<Row[]>;
  /** A table's columns, in order. */
  columns(table: TableName): Promise<string[]>;
  /** The feed's counter: the last seq handed out (`n`). */
  feedCounterSql: string;
  /** Before the first row: sets the indexes and triggers aside; rows come in `columns`' order. */
  begin(columns: Record<TableName, string[]>): Promise<void>;
  /** Adds a row to the current transaction. */
  add(table: TableName, values: unknown[]): void;
  /** Commits the rows added since the last commit. */
  commit(): Promise<void>;
  /**
   * After the copy: deletes the templates' feed events before `pruneBefore`, puts the indexes
   * and triggers back, counts the copies (orders from `firstCopiedOrder`) in `order_counts`,
   * and sets the store's counters (the feed's last seq, each table's next id).
   */
  finish(end: { lastSeq: number; pruneBefore: number | undefined; firstCopiedOrder: number }): Promise<void>;
  close(): Promise<void>;
}

export function sqliteTarget(path: string): Target {
  const db = new Database(path);
  // A bulk build: a crash loses the build, which is started again; no commit needs to be durable.
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -1000000');
  const schema = (type: string) =>
    db
      .prepare(
        `SELECT name, sql FROM sqlite_master WHERE type = ? AND sql IS NOT NULL AND tbl_name IN (${TABLE_LIST})`,
      )
      .all(type) as Array<{ name: string; sql: string }>;
  const indexes = schema('index');
  const triggers = schema('trigger');
  const inserts = new Map<TableName, Database.Statement>();
  return {
    all: async (sql) => db.prepare(sql).all() as Row[],
    columns: async (table) =>
      (db.pragma(`table_info(${table})`) as Array<{ name: string }>).map((c) => c.name),
    feedCounterSql: "SELECT seq AS n FROM sqlite_sequence WHERE name = 'feed_events'",
    begin: async (columns) => {
      checkTriggers(triggers.map((t) => t.name));
      for (const index of indexes) db.exec(`DROP INDEX ${index.name}`);
      for (const trigger of triggers) db.exec(`DROP TRIGGER ${trigger.name}`);
      for (const { table } of PER_ORDER) {
        const names = columns[table];
        inserts.set(
          table,
          db.prepare(
            `INSERT INTO ${table} (${names.map((c) => `"${c}"`).join(', ')}) VALUES (${names.map(() => '?').join(', ')})`,
          ),
        );
      }
    },
    add: (table, values) => {
      if (!db.inTransaction) db.exec('BEGIN');
      inserts.get(table)!.run(values);
    },
    commit: async () => {
      if (db.inTransaction) db.exec('COMMIT');
    },
    finish: async ({ lastSeq, pruneBefore, firstCopiedOrder }) => {
      if (pruneBefore !== undefined) {
        db.prepare('DELETE FROM feed_events WHERE timestamp < ?').run(pruneBefore);
      }
      for (const index of indexes) db.exec(index.sql);
      db.exec(orderCountsOfCopies(firstCopiedOrder));
      for (const trigger of triggers) db.exec(trigger.sql);
      db.prepare('UPDATE notify_endpoints SET cursor = ?').run(lastSeq);
      db.prepare("UPDATE sqlite_sequence SET seq = ? WHERE name = 'feed_events'").run(lastSeq);
      db.exec(
        "UPDATE sqlite_sequence SET seq = (SELECT MAX(id) FROM notify_deliveries) WHERE name = 'notify_deliveries'",
      );
      db.pragma('wal_checkpoint(TRUNCATE)');
    },
    close: async () => {
      db.close();
    },
  };
}

/** A value as COPY's text format writes it: `\N` for null, `\` escaped before tab, newline, CR and itself. */
function copyText(value: unknown): string {
  if (value === null || value === undefined) return '\\N';
  if (typeof value === 'string')
    return /[\\\t\n\r]/.test(value) ? value.replace(/[\\\t\n\r]/g, escapeChar) : value;
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (typeof value === 'boolean') return value ? 't' : 'f';
  throw new Error(`a value COPY's text format is not written for here: ${typeof value}`);
}

const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };
const escapeChar = (c: string) => ESCAPES[c]!;

export async function postgresTarget(url: string): Promise<Target> {
  const sql = postgres(url, {
    max: 1,
    onnotice: () => {},
    fetch_types: false,
    types: {
      bigint: { to: 20, from: [20], parse: (x: string) => Number(x), serialize: (x: unknown) => String(x) },
    } as unknown as Record<string, never>,
  });
  const indexes = (await sql.unsafe(
    `SELECT indexname AS name, indexdef AS sql FROM pg_indexes i
     WHERE schemaname = current_schema() AND tablename IN (${TABLE_LIST})
       AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`,
  )) as unknown as Array<{ name: string; sql: string }>;
  let copyColumns = {} as Record<TableName, string[]>;
  // Each table's rows since the last commit, as COPY text, in pieces of about a megabyte.
  const pending = new Map<TableName, { pieces: string[]; piece: string }>();
  const alterTriggers = async (action: 'DISABLE' | 'ENABLE') => {
    for (const { table } of PER_ORDER) await sql.unsafe(`ALTER TABLE ${table} ${action} TRIGGER USER`);
  };
  return {
    all: (text) => sql.unsafe(text) as unknown as Promise<Row[]>,
    columns: async (table) =>
      (
        await sql`SELECT column_name FROM information_schema.columns
          WHERE table_schema = current_schema() AND table_name = ${table} ORDER BY ordinal_position`
      ).map((c) => String(c.column_name)),
    feedCounterSql: 'SELECT seq AS n FROM feed_counter WHERE id = 1',
    begin: async (columns) => {
      copyColumns = columns;
      const triggers = await sql.unsafe(
        `SELECT t.tgname AS name FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE NOT t.tgisinternal AND n.nspname = current_schema() AND c.relname IN (${TABLE_LIST})`,
      );
      checkTriggers(triggers.map((t) => String(t.name)));
      for (const index of indexes) await sql.unsafe(`DROP INDEX ${index.name}`);
      await alterTriggers('DISABLE');
    },
    add: (table, values) => {
      let rows = pending.get(table);
      if (!rows) {
        rows = { pieces: [], piece: '' };
        pending.set(table, rows);
      }
      rows.piece += `${values.map(copyText).join('\t')}\n`;
      if (rows.piece.length > 1_000_000) {
        rows.pieces.push(rows.piece);
        rows.piece = '';
      }
    },
    commit: async () => {
      await sql.begin(async (tx) => {
        await tx.unsafe('SET LOCAL synchronous_commit = off');
        for (const [table, rows] of pending) {
          const names = copyColumns[table].map((c) => `"${c}"`).join(', ');
          const stream = await tx.unsafe(`COPY ${table} (${names}) FROM STDIN`).writable();
          await pipeline(Readable.from([...rows.pieces, rows.piece]), stream);
        }
      });
      pending.clear();
    },
    finish: async ({ lastSeq, pruneBefore, firstCopiedOrder }) => {
      if (pruneBefore !== undefined) await sql`DELETE FROM feed_events WHERE timestamp < ${pruneBefore}`;
      for (const index of indexes) await sql.unsafe(index.sql);
      await sql.unsafe(orderCountsOfCopies(firstCopiedOrder));
      await alterTriggers('ENABLE');
      await sql`UPDATE notify_endpoints SET cursor = ${lastSeq}`;
      await sql`UPDATE feed_counter SET seq = ${lastSeq} WHERE id = 1`;
      for (const table of ['orders', 'order_events', 'notify_deliveries']) {
        await sql.unsafe(
          `SELECT setval(pg_get_serial_sequence('${table}', 'id'), (SELECT MAX(id) FROM ${table}))`,
        );
      }
      // What autovacuum does to a store of years, and has not had the time to do to this one:
      // the statistics, and the visibility map without which no index-only scan skips the table.
      await sql.unsafe('VACUUM (ANALYZE)');
    },
    close: () => sql.end(),
  };
}
