import type { Database } from 'better-sqlite3';
import type { OpenedStore } from './open-store.js';
import type { SqlExecutor } from './sql/executor.js';
import { openSqliteConnection } from './sqlite/sqlite-db.js';
import { StoreError } from './store-error.js';

/**
 * Every table of the store, in the order `store migrate` copies them: a table after the tables
 * its foreign keys name (orders before order_events, notify_endpoints before notify_deliveries).
 * A table of the schema missing here makes the copy refuse to start (one place to add it).
 */
export const COPY_ORDER = [
  'orders',
  'order_events',
  'poll_plans',
  'feed_events',
  'api_tokens',
  'upstream_circuit',
  'notify_endpoints',
  'notify_deliveries',
  'notify_outbox',
  'catalog_categories',
  'catalog_products',
  'catalog_sync',
  'balance_ledger',
  'balance_observations',
] as const;

/**
 * Parameters per multi-row INSERT: rows per batch are this divided by the table's columns (at
 * most {@link MAX_BATCH_ROWS}), so a wide table (orders, 34 columns) sends about 150 rows a
 * statement and a narrow one 500, each well under PostgreSQL's 65,535 parameters.
 */
const PARAMS_PER_INSERT = 5000;
const MAX_BATCH_ROWS = 500;

export interface TableCopied {
  table: string;
  rows: number;
  ms: number;
}

export interface MigrateSummary {
  /** The SQLite file copied. */
  from: string;
  /** The PostgreSQL database, its password hidden. */
  to: string;
  tables: TableCopied[];
  rows: number;
  /** The newest feed seq, the same on both. */
  last_feed_seq: number;
  /** Values in integer columns that SQLite kept with a fraction, rounded to whole numbers. */
  rounded: number;
  ms: number;
}

export interface MigrateOptions {
  /** The SQLite store (`openStore` on its URL: migrated to the latest schema). */
  source: OpenedStore;
  /** Its file, for the check that nothing wrote to it during the copy. */
  sourcePath: string;
  /** The PostgreSQL store (`openStore` on `--to`: created and migrated to the latest schema). */
  target: OpenedStore;
  /** The target's URL with its password hidden, for messages and the summary. */
  targetLabel: string;
  /** Called after each table is copied, inside the copy (the CLI prints it on stderr). */
  onTable?: (copied: TableCopied) => void | Promise<void>;
}

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * Copies the SQLite store into the empty PostgreSQL store (docs/store-backends.md, "Moving a SQLite
 * store to PostgreSQL"): every table in {@link COPY_ORDER} in ONE PostgreSQL write transaction,
 * ids and seqs kept; then every identity set to its table's max, the row counts and the newest
 * feed seq compared with the source's, and, after COMMIT, `ANALYZE`. The source is read in one
 * SQLite read transaction (one snapshot); if another connection commits to the file meanwhile,
 * the copy is rolled back and refused (`SOURCE_CHANGED`): the apps must be stopped first. A
 * target with any row is refused (`TARGET_NOT_EMPTY`) before anything is written: it never merges.
 */
export async function migrateToPostgres({
  source,
  sourcePath,
  target,
  targetLabel,
  onTable,
}: MigrateOptions): Promise<MigrateSummary> {
  const started = Date.now();
  const snapshot = source.sqlite;
  if (source.backend !== 'sqlite' || snapshot === undefined) {
    throw new StoreError('NOT_SQLITE_SOURCE', 'store migrate copies a SQLite store: the source is not one');
  }
  if (target.backend !== 'postgres') {
    throw new StoreError(
      'NOT_POSTGRES_TARGET',
      'store migrate copies into PostgreSQL: give --to postgres://user@host:port/db',
    );
  }
  const sourceTables = snapshot
    .prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'order_counts'",
    )
    .pluck()
    .all() as string[];
  const targetTables = (
    await target.db.all<{ name: string }>(
      `SELECT table_name AS name FROM information_schema.tables
        WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
          AND table_name NOT IN ('schema_version', 'feed_counter', 'order_counts')`,
    )
  ).map((r) => r.name);
  checkTables('the SQLite store', sourcePath, sourceTables);
  checkTables('the PostgreSQL store', targetLabel, targetTables);

  // Another connection's commit to the file changes its data_version (as this connection sees it).
  const watcher = openSqliteConnection({ path: sourcePath });
  const dataVersion = () => watcher.pragma('data_version', { simple: true }) as number;
  const before = dataVersion();
  const tables: TableCopied[] = [];
  let rounded = 0;
  let lastFeedSeq = 0;
  snapshot.exec('BEGIN');
  try {
    await target.db.write(
      async (tx) => {
        await refuseRows(tx, targetLabel);
        for (const table of COPY_ORDER) {
          const tableStarted = Date.now();
          const copied = await copyTable(snapshot, tx, table, targetLabel);
          rounded += copied.rounded;
          const entry = { table, rows: copied.rows, ms: Date.now() - tableStarted };
          tables.push(entry);
          await onTable?.(entry);
        }
        await setIdentities(tx);
        await setFeedCounter(snapshot, tx);
        lastFeedSeq = await compare(snapshot, tx);
        if (dataVersion() !== before) {
          throw new StoreError(
            'SOURCE_CHANGED',
            `another process wrote to ${sourcePath} during the copy, so the copy would miss it; ` +
              'nothing was written to the target: stop the apps that open the store (pm2 stop h2h-worker h2h-api) and run it again',
          );
        }
      },
      { feed: true },
    );
  } finally {
    snapshot.exec('ROLLBACK');
    watcher.close();
  }
  await target.db.exec('ANALYZE');
  return {
    from: sourcePath,
    to: targetLabel,
    tables,
    rows: tables.reduce((sum, t) => sum + t.rows, 0),
    last_feed_seq: lastFeedSeq,
    rounded,
    ms: Date.now() - started,
  };
}

function checkTables(which: string, where: string, tables: readonly string[]): void {
  const known = new Set<string>(COPY_ORDER);
  const unknown = tables.filter((t) => !known.has(t));
  const missing = COPY_ORDER.filter((t) => !tables.includes(t));
  if (unknown.length === 0 && missing.length === 0) return;
  throw new StoreError(
    'COPY_MISMATCH',
    `${which} at ${where} does not have the tables store migrate copies (` +
      [
        unknown.length ? `not copied: ${unknown.join(', ')}` : '',
        missing.length ? `missing: ${missing.join(', ')}` : '',
      ]
        .filter(Boolean)
        .join('; ') +
      '): both are migrated to this version on opening, so a table added to the schema must be added to COPY_ORDER in src/store/migrate-to-postgres.ts',
  );
}

/** Refuses a target with a row in any table: a copy never merges into another store. */
async function refuseRows(tx: SqlExecutor, targetLabel: string): Promise<void> {
  const filled: string[] = [];
  for (const table of COPY_ORDER) {
    const row = await tx.get<{ found: boolean }>(`SELECT EXISTS (SELECT 1 FROM ${quote(table)}) AS found`);
    if (row?.found) filled.push(table);
  }
  if (filled.length === 0) return;
  throw new StoreError(
    'TARGET_NOT_EMPTY',
    `${targetLabel} already holds a store (rows in ${filled.join(', ')}); store migrate copies only into ` +
      'an empty database and never merges: give --to a new database (CREATE DATABASE …), or drop this one if it is a failed earlier copy',
  );
}

/** The target's integer columns of `table` (a fraction SQLite kept there is rounded). */
async function targetColumns(tx: SqlExecutor, table: string): Promise<Map<string, string>> {
  const rows = await tx.all<{ name: string; type: string }>(
    `SELECT column_name AS name, data_type AS type FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = @table`,
    { table },
  );
  return new Map(rows.map((r) => [r.name, r.type]));
}

async function copyTable(
  snapshot: Database,
  tx: SqlExecutor,
  table: string,
  targetLabel: string,
): Promise<{ rows: number; rounded: number }> {
  const select = snapshot.prepare(`SELECT * FROM ${quote(table)}`).raw(true);
  const columns = select.columns().map((c) => c.name);
  const types = await targetColumns(tx, table);
  const absent = columns.filter((c) => !types.has(c));
  const extra = [...types.keys()].filter((c) => !columns.includes(c));
  if (absent.length > 0 || extra.length > 0) {
    throw new StoreError(
      'COPY_MISMATCH',
      `${table} has other columns in ${targetLabel} (${[...absent.map((c) => `not there: ${c}`), ...extra.map((c) => `only there: ${c}`)].join(', ')}): both stores must be at the same schema version`,
    );
  }
  const integer = columns.map((c) => ['bigint', 'integer', 'smallint'].includes(types.get(c)!));
  const perBatch = Math.max(1, Math.min(MAX_BATCH_ROWS, Math.floor(PARAMS_PER_INSERT / columns.length)));
  const names = columns.map(quote).join(', ');
  let batch: unknown[][] = [];
  let rows = 0;
  let rounded = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    const params: Record<string, unknown> = {};
    const tuples = batch.map((row, r) => {
      row.forEach((value, c) => {
        let v = value;
        if (integer[c] && typeof v === 'number' && !Number.isInteger(v)) {
          v = Math.round(v);
          rounded += 1;
        }
        params[`r${r}_${c}`] = v;
      });
      return `(${columns.map((_, c) => `@r${r}_${c}`).join(', ')})`;
    });
    await tx.run(`INSERT INTO ${quote(table)} (${names}) VALUES ${tuples.join(', ')}`, params);
    rows += batch.length;
    batch = [];
  };
  for (const row of select.iterate() as IterableIterator<unknown[]>) {
    batch.push(row);
    if (batch.length >= perBatch) await flush();
  }
  await flush();
  return { rows, rounded };
}

/** Every identity column's sequence set to its table's max, so the next row gets the next id or seq. */
async function setIdentities(tx: SqlExecutor): Promise<void> {
  const identities = await tx.all<{ table: string; column: string }>(
    `SELECT table_name AS "table", column_name AS "column" FROM information_schema.columns
      WHERE table_schema = current_schema() AND is_identity = 'YES'`,
  );
  for (const { table, column } of identities) {
    const c = quote(column);
    await tx.get(
      `SELECT setval(pg_get_serial_sequence(@table, @column), COALESCE(MAX(${c}), 1), MAX(${c}) IS NOT NULL) FROM ${quote(table)}`,
      { table, column },
    );
  }
}

/**
 * The feed's counter (postgres/migrations.ts, `feed_counter`) set to where SQLite's AUTOINCREMENT
 * stands: its `sqlite_sequence` entry, which remembers the last seq even when retention pruned
 * the newest rows, else the newest seq copied. The next event then gets the seq SQLite would
 * have given it, so no shop cursor or endpoint cursor ever sees a seq reused.
 */
async function setFeedCounter(snapshot: Database, tx: SqlExecutor): Promise<void> {
  const remembered = snapshot
    .prepare("SELECT seq FROM sqlite_sequence WHERE name = 'feed_events'")
    .pluck()
    .get() as number | undefined;
  const newest = snapshot.prepare('SELECT COALESCE(MAX(seq), 0) FROM feed_events').pluck().get() as number;
  await tx.run('UPDATE feed_counter SET seq = @seq WHERE id = 1', { seq: Math.max(remembered ?? 0, newest) });
}

/** Compares every table's row count and the newest feed seq with the source's snapshot; the seq. */
async function compare(snapshot: Database, tx: SqlExecutor): Promise<number> {
  const differ: string[] = [];
  for (const table of COPY_ORDER) {
    const sql = `SELECT COUNT(*) AS n FROM ${quote(table)}`;
    const want = (snapshot.prepare(sql).get() as { n: number }).n;
    const got = Number((await tx.get<{ n: number }>(sql))?.n);
    if (want !== got) differ.push(`${table}: ${want} in the source, ${got} copied`);
  }
  const seqSql = 'SELECT COALESCE(MAX(seq), 0) AS seq FROM feed_events';
  const want = (snapshot.prepare(seqSql).get() as { seq: number }).seq;
  const got = Number((await tx.get<{ seq: number }>(seqSql))?.seq);
  if (want !== got) differ.push(`newest feed seq: ${want} in the source, ${got} copied`);
  if (differ.length > 0) {
    throw new StoreError(
      'COPY_MISMATCH',
      `the copy does not match the source (${differ.join('; ')}); nothing was written to the target: report this as a bug`,
    );
  }
  return want;
}
