// The volume bench's bulk loader: a store of n orders exactly as the write path writes them
// (volume-orders.ts, order after order), in minutes instead of days.
//
// The first `kinds` orders (the templates) are written through the write path itself. Every
// later order i is order k = i % kinds copied: its rows of `orders`, `order_events`,
// `feed_events` and `notify_deliveries` (each row of one order names it by partner_ref) with
// k's token replaced by i's in every text (references, JSON), every time moved by
// base(i) − base(k) (the integer ms columns, and every ISO 8601 time inside a text), and the
// row ids (order ids, event ids, feed seqs, delivery ids and the seq a delivery names)
// continuing where the previous order's ended. The store's counters follow: the feed's
// sequence, the endpoint's cursor, the identity sequences on PostgreSQL. Triggers of the
// schema (if any) fire on the copies as on the write path's rows.
//
// `pruneBefore`: feed events committed before it are not written (their seqs are used), as
// the hourly feed pruning (H2H_FEED_RETENTION_D) run at the end would have deleted them.
// test/bench/volume-loader.test.ts builds stores both ways and compares every row of every table.
import Database from 'better-sqlite3';
import postgres from 'postgres';
import { openStore } from '../src/store/open-store.js';
import { parseStoreUrl } from '../src/store/store-url.js';
import {
  addVolumeEndpoint,
  settableClock,
  VOLUME_KINDS,
  volumeBase,
  volumeToken,
  writeVolumeOrder,
} from './volume-orders.js';

type Row = Record<string, unknown>;

/** The tables whose rows belong to one order, in the order they are copied, with their id and time columns. */
const PER_ORDER = [
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

type TableName = (typeof PER_ORDER)[number]['table'];

const TOKEN = /v\d{10}/;
const ISO_TIME = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g;

export interface LoadOptions {
  /** Orders written through the write path and copied (default {@link VOLUME_KINDS}). */
  kinds?: number;
  /** Feed events committed before this (ms) are left out, as pruning would have deleted them. */
  pruneBefore?: number;
  /** Orders copied per transaction (default 20,000). */
  chunk?: number;
  /** Called after each transaction with the orders in the store so far. */
  onProgress?: (done: number) => void;
}

/** A template order's rows, per table, in id order. */
type Template = Record<TableName, Row[]>;

/** Builds a store of `n` volume orders at `url` (an empty database): the write path's, copied. */
export async function loadVolumeStore(url: string, n: number, options: LoadOptions = {}): Promise<void> {
  const kinds = options.kinds ?? VOLUME_KINDS;
  const written = Math.min(n, kinds);
  const clock = settableClock(volumeBase(0) - 1000);
  const store = await openStore(url, { now: clock.now, role: 'bench' });
  try {
    const endpointId = await addVolumeEndpoint(store);
    for (let i = 0; i < written; i++) await writeVolumeOrder(store, clock, endpointId, i, kinds);
    if (options.pruneBefore !== undefined && n <= kinds) {
      clock.set(options.pruneBefore);
      await store.feed.prune(0);
    }
  } finally {
    await store.close();
  }
  options.onProgress?.(written);
  if (n <= kinds) return;
  const location = parseStoreUrl(url);
  const target =
    location.backend === 'postgres' ? await postgresTarget(location.url) : sqliteTarget(location.path);
  try {
    await copyOrders(target, n, kinds, options);
  } finally {
    await target.close();
  }
}

/** What the copy needs of a backend. */
interface Target {
  all(sql: string): Promise<Row[]>;
  /** Runs `work` in one transaction; `insert` adds rows to a table within it. */
  transaction(
    work: (insert: (table: TableName, rows: Row[]) => Promise<void>) => Promise<void>,
  ): Promise<void>;
  /** The feed's counter: the last seq handed out (`n`). */
  feedCounterSql: string;
  /**
   * After the copy: sets the store's counters (the feed's last seq, each table's next id) and
   * deletes the templates' feed events before `pruneBefore`.
   */
  finish(lastSeq: number, pruneBefore: number | undefined): Promise<void>;
  close(): Promise<void>;
}

function sqliteTarget(path: string): Target {
  const db = new Database(path);
  // A bulk build: a crash loses the build, which is started again; no commit needs to be durable.
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -1000000');
  // The copied tables' indexes are dropped for the copy and built again after it from the same
  // SQL: one sort per index instead of a B-tree insert per row (the same index either way).
  const indexes = db
    .prepare(
      `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL
       AND tbl_name IN (${PER_ORDER.map((t) => `'${t.table}'`).join(', ')})`,
    )
    .all() as Array<{ name: string; sql: string }>;
  let dropped = false;
  const statements = new Map<string, Database.Statement>();
  const statementFor = (table: string, row: Row) => {
    let statement = statements.get(table);
    if (!statement) {
      const columns = Object.keys(row);
      statement = db.prepare(
        `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')})`,
      );
      statements.set(table, statement);
    }
    return statement;
  };
  return {
    all: async (sql) => db.prepare(sql).all() as Row[],
    transaction: async (work) => {
      if (!dropped) {
        for (const index of indexes) db.exec(`DROP INDEX ${index.name}`);
        dropped = true;
      }
      db.exec('BEGIN');
      try {
        await work(async (table, rows) => {
          for (const row of rows) statementFor(table, row).run(row);
        });
        db.exec('COMMIT');
      } catch (error) {
        db.exec('ROLLBACK');
        throw error;
      }
    },
    feedCounterSql: "SELECT seq AS n FROM sqlite_sequence WHERE name = 'feed_events'",
    finish: async (lastSeq, pruneBefore) => {
      if (pruneBefore !== undefined) {
        db.prepare('DELETE FROM feed_events WHERE timestamp < @pruneBefore').run({ pruneBefore });
      }
      for (const index of indexes) db.exec(index.sql);
      db.prepare('UPDATE notify_endpoints SET cursor = @lastSeq').run({ lastSeq });
      db.prepare("UPDATE sqlite_sequence SET seq = @lastSeq WHERE name = 'feed_events'").run({ lastSeq });
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

async function postgresTarget(url: string): Promise<Target> {
  const sql = postgres(url, {
    max: 1,
    onnotice: () => {},
    fetch_types: false,
    types: {
      bigint: { to: 20, from: [20], parse: (x: string) => Number(x), serialize: (x: unknown) => String(x) },
    } as unknown as Record<string, never>,
  });
  // As on SQLite, the copied tables' indexes (but those of constraints) are built after the copy.
  const indexes = (await sql.unsafe(
    `SELECT indexname AS name, indexdef AS sql FROM pg_indexes i
     WHERE schemaname = current_schema() AND tablename IN (${PER_ORDER.map((t) => `'${t.table}'`).join(', ')})
       AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`,
  )) as unknown as Array<{ name: string; sql: string }>;
  let dropped = false;
  // Rows per statement: PostgreSQL takes at most 65,535 parameters.
  const batch = (row: Row) => Math.max(1, Math.floor(60_000 / Object.keys(row).length));
  return {
    all: (text) => sql.unsafe(text) as unknown as Promise<Row[]>,
    transaction: async (work) => {
      if (!dropped) {
        for (const index of indexes) await sql.unsafe(`DROP INDEX ${index.name}`);
        dropped = true;
      }
      await sql.begin(async (tx) => {
        await tx.unsafe('SET LOCAL synchronous_commit = off');
        await work(async (table, rows) => {
          if (rows.length === 0) return;
          const columns = Object.keys(rows[0]!);
          const size = batch(rows[0]!);
          for (let at = 0; at < rows.length; at += size) {
            await tx`INSERT INTO ${tx(table)} ${tx(rows.slice(at, at + size) as Row[], columns)}`;
          }
        });
      });
    },
    feedCounterSql: 'SELECT seq AS n FROM feed_counter WHERE id = 1',
    finish: async (lastSeq, pruneBefore) => {
      if (pruneBefore !== undefined) await sql`DELETE FROM feed_events WHERE timestamp < ${pruneBefore}`;
      for (const index of indexes) await sql.unsafe(index.sql);
      await sql`UPDATE notify_endpoints SET cursor = ${lastSeq}`;
      await sql`UPDATE feed_counter SET seq = ${lastSeq} WHERE id = 1`;
      for (const table of ['orders', 'order_events', 'notify_deliveries']) {
        await sql.unsafe(
          `SELECT setval(pg_get_serial_sequence('${table}', 'id'), (SELECT MAX(id) FROM ${table}))`,
        );
      }
      await sql.unsafe('ANALYZE');
    },
    close: () => sql.end(),
  };
}

/** The index of the order a row belongs to, from the token in its partner_ref. */
function orderOf(row: Row): number {
  const match = TOKEN.exec(String(row.partner_ref ?? ''));
  if (!match) throw new Error(`a row without an order's token: ${JSON.stringify(row).slice(0, 200)}`);
  return Number(match[0].slice(1));
}

async function readTemplates(target: Target, kinds: number): Promise<Template[]> {
  const templates: Template[] = Array.from({ length: kinds }, () => ({
    orders: [],
    order_events: [],
    feed_events: [],
    notify_deliveries: [],
  }));
  for (const { table, id } of PER_ORDER) {
    for (const row of await target.all(`SELECT * FROM ${table} ORDER BY ${id}`)) {
      if (row.partner_ref === null)
        throw new Error(`${table} holds a row of no order: the loader copies orders only`);
      templates[orderOf(row)]![table].push(row);
    }
  }
  const outbox = await target.all('SELECT COUNT(*) AS n FROM notify_outbox');
  if (Number(outbox[0]!.n) !== 0) throw new Error('the template left notifications in the outbox');
  const ledger = await target.all('SELECT COUNT(*) AS n FROM balance_ledger');
  if (Number(ledger[0]!.n) !== 0)
    throw new Error('the template wrote balance_ledger rows, which the loader does not sum');
  return templates;
}

async function maxOf(target: Target, table: string, column: string): Promise<number> {
  const [row] = await target.all(`SELECT MAX(${column}) AS n FROM ${table}`);
  return Number(row?.n ?? 0);
}

async function copyOrders(target: Target, n: number, kinds: number, options: LoadOptions): Promise<void> {
  const templates = await readTemplates(target, kinds);
  // The feed's seqs continue from the counter (a pruned event's seq is used all the same).
  const [counter] = await target.all(target.feedCounterSql);
  const next: Record<TableName, number> = {
    orders: (await maxOf(target, 'orders', 'id')) + 1,
    order_events: (await maxOf(target, 'order_events', 'id')) + 1,
    feed_events: Number(counter?.n ?? 0) + 1,
    notify_deliveries: (await maxOf(target, 'notify_deliveries', 'id')) + 1,
  };
  const chunk = options.chunk ?? 20_000;
  for (let from = kinds; from < n; from += chunk) {
    const to = Math.min(n, from + chunk);
    const rows: Record<TableName, Row[]> = {
      orders: [],
      order_events: [],
      feed_events: [],
      notify_deliveries: [],
    };
    for (let i = from; i < to; i++)
      copyOrder(templates[i % kinds]!, i % kinds, i, next, rows, options.pruneBefore);
    await target.transaction(async (insert) => {
      for (const { table } of PER_ORDER) await insert(table, rows[table]);
    });
    options.onProgress?.(to);
  }
  await target.finish(next.feed_events - 1, options.pruneBefore);
}

function copyOrder(
  template: Template,
  k: number,
  i: number,
  next: Record<TableName, number>,
  out: Record<TableName, Row[]>,
  pruneBefore: number | undefined,
): void {
  const from = volumeToken(k);
  const to = volumeToken(i);
  const shift = volumeBase(i) - volumeBase(k);
  const seqs = new Map<number, number>();
  for (const { table, id, times } of PER_ORDER) {
    for (const row of template[table]) {
      const copy: Row = {};
      for (const [column, value] of Object.entries(row)) {
        if (column === id) copy[column] = next[table]++;
        else if (value === null || value === undefined) copy[column] = value;
        else if ((times as readonly string[]).includes(column)) copy[column] = Number(value) + shift;
        else if (typeof value === 'string') copy[column] = moveText(value, from, to, shift);
        else copy[column] = value;
      }
      if (table === 'feed_events') {
        seqs.set(Number(row.seq), Number(copy.seq));
        if (pruneBefore !== undefined && Number(copy.timestamp) < pruneBefore) continue;
      }
      if (table === 'notify_deliveries') {
        const seq = seqs.get(Number(row.seq));
        if (seq === undefined) throw new Error(`a delivery of feed event ${row.seq}, not order ${k}'s`);
        copy.seq = seq;
      }
      out[table].push(copy);
    }
  }
}

function moveText(text: string, from: string, to: string, shift: number): string {
  const renamed = text.includes(from) ? text.replaceAll(from, to) : text;
  return renamed.replace(ISO_TIME, (time) => new Date(Date.parse(time) + shift).toISOString());
}
