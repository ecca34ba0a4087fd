import { migrateToPostgres } from '../../store/migrate-to-postgres.js';
import { type OpenedStore, openStore } from '../../store/open-store.js';
import { StoreError } from '../../store/store-error.js';
import { parseStoreUrl, redactUrl } from '../../store/store-url.js';
import { openContext } from '../context.js';
import { printPublicJson, renderTable, runAction } from '../output.js';
import { createProgressLine } from '../progress.js';

/** The PostgreSQL URL of `--to`, or a refusal naming what is accepted (never its password). */
function postgresTarget(to: string): string {
  let location: ReturnType<typeof parseStoreUrl> | undefined;
  try {
    location = parseStoreUrl(to);
  } catch {
    location = undefined;
  }
  if (location?.backend !== 'postgres') {
    throw new StoreError(
      'NOT_POSTGRES_TARGET',
      `--to ${redactUrl(to)} is not a PostgreSQL URL: give --to postgres://user@host:port/db (the password in PGPASSWORD or the URL)`,
    );
  }
  return location.url;
}

/** `store migrate --to postgres://…`: copies the SQLite store into an empty PostgreSQL database (docs/cli.md). */
export const storeMigrate = (flags: { to: string; json?: boolean }) =>
  runAction(Boolean(flags.json), async () => {
    const context = await openContext({});
    const { config } = context;
    const opened: OpenedStore[] = [];
    try {
      const targetUrl = postgresTarget(flags.to);
      const from = parseStoreUrl(config.dbUrl);
      if (from.backend !== 'sqlite') {
        throw new StoreError(
          'NOT_SQLITE_SOURCE',
          `store migrate copies a SQLite store, and H2H_DB_URL names a PostgreSQL database (${redactUrl(config.dbUrl)}): set H2H_DB_URL (or H2H_DB_PATH) to the SQLite file to copy`,
        );
      }
      const options = { role: 'cli', lockTimeoutMs: config.dbLockTimeoutMs } as const;
      // Both are brought to the latest schema on opening; the source must exist.
      const source = await openStore(config.dbUrl, {
        ...options,
        mustExist: true,
      });
      opened.push(source);
      const target = await openStore(targetUrl, { ...options, poolMax: 2 });
      opened.push(target);
      const to = redactUrl(targetUrl);
      process.stderr.write(`copying ${from.path} to ${to}\n`);
      const summary = await migrateToPostgres({
        source,
        sourcePath: from.path,
        target,
        targetLabel: to,
        onTable: ({ table, rows, ms }) => {
          process.stderr.write(`  ${table}: ${rows.toLocaleString('en-US')} rows (${ms} ms)\n`);
        },
      });
      if (flags.json) {
        process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
        return;
      }
      process.stdout.write(
        `${renderTable(summary.tables, [
          { header: 'Table', cell: (t) => t.table },
          { header: 'Rows', cell: (t) => t.rows.toLocaleString('en-US') },
        ])}\n` +
          `Copied ${summary.rows.toLocaleString('en-US')} rows in ${(summary.ms / 1000).toFixed(1)} s; ` +
          `newest feed seq ${summary.last_feed_seq}, the same on both` +
          (summary.rounded > 0 ? `; ${summary.rounded} fractional values in integer columns rounded` : '') +
          `.\nNext: set H2H_DB_URL to the --to URL (with its password) for every app, and start them.\n`,
      );
    } finally {
      for (const s of opened.reverse()) await s.close();
      await context.close();
    }
  });

const mb = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MB`;

/** The configured store's SQLite file, or a refusal naming what does the job on PostgreSQL. */
function sqliteStorePath(dbUrl: string, command: string, equivalent: string): string {
  const location = parseStoreUrl(dbUrl);
  if (location.backend !== 'sqlite') {
    throw new StoreError(
      'NOT_SQLITE_STORE',
      `store ${command} works on a SQLite store, and H2H_DB_URL names a PostgreSQL database (${redactUrl(dbUrl)}): ${equivalent}`,
    );
  }
  return location.path;
}

/** `store backup PATH [--force]`: a consistent online copy of the SQLite store (docs/store.md, "Backups"). */
export const storeBackup = (path: string, flags: { force?: boolean; json?: boolean }) =>
  runAction(Boolean(flags.json), async () => {
    const { config } = await openContext({});
    const source = sqliteStorePath(
      config.dbUrl,
      'backup',
      'back it up with pg_dump -Fc (a consistent copy while the apps run), or pg_basebackup with WAL archiving for a point in time (docs/deployment.md, "Backups")',
    );
    const { backupSqliteStore } = await import('../../store/sqlite/sqlite-backup.js');
    process.stderr.write(`copying ${source} to ${path}\n`);
    const progress = createProgressLine();
    let summary: Awaited<ReturnType<typeof backupSqliteStore>>;
    try {
      summary = await backupSqliteStore({
        source,
        destination: path,
        force: Boolean(flags.force),
        lockTimeoutMs: config.dbLockTimeoutMs,
        onProgress: ({ totalPages, remainingPages, restarts }) =>
          progress.update(
            totalPages - remainingPages,
            totalPages,
            restarts > 0 ? 'pages (written to meanwhile: copying the rest at once)' : 'pages',
          ),
      });
    } finally {
      progress.done();
    }
    if (flags.json) {
      printPublicJson(summary);
      return;
    }
    process.stdout.write(
      `Backed up ${summary.orders.toLocaleString('en-US')} orders (schema ${summary.schemaVersion}, ${mb(summary.bytes)}, ` +
        `${summary.pages.toLocaleString('en-US')} pages) to ${summary.path} in ${(summary.durationMs / 1000).toFixed(1)} s; ` +
        `quick_check ${summary.quickCheck}` +
        (summary.restarts > 0
          ? `; the apps wrote meanwhile, so the copy was taken again at once (${summary.restarts}×)`
          : '') +
        `.\nRestore: stop the apps, put the file at H2H_DB_PATH (no -wal or -shm file beside it), start them.\n`,
    );
  });

/** `store vacuum`: gives the space of deleted rows back (docs/store.md, "Vacuum"). */
export const storeVacuum = (flags: { json?: boolean }) =>
  runAction(Boolean(flags.json), async () => {
    const context = await openContext({});
    const { config } = context;
    if (parseStoreUrl(config.dbUrl).backend === 'postgres') {
      // Opened first for its clear errors (unreachable, no store there).
      const store = await openStore(config.dbUrl, { role: 'cli', mustExist: true, poolMax: 1 });
      await store.close();
      const { vacuumPostgresStore } = await import('../../store/postgres/postgres-vacuum.js');
      process.stderr.write(`VACUUM (ANALYZE) of ${redactUrl(config.dbUrl)}; the apps may keep running\n`);
      const summary = { backend: 'postgres', ...(await vacuumPostgresStore(config.dbUrl)) };
      if (flags.json) return printPublicJson(summary);
      process.stdout.write(
        `VACUUM (ANALYZE) done in ${(summary.durationMs / 1000).toFixed(1)} s; database ${mb(summary.bytesBefore)} before, ${mb(summary.bytesAfter)} after. ` +
          'The space of deleted rows is reusable now; the files shrink only with VACUUM FULL, which locks each table (docs/store.md, "Vacuum").\n',
      );
      return;
    }
    const path = sqliteStorePath(config.dbUrl, 'vacuum', '');
    const { planSqliteVacuum, vacuumSqliteStore } = await import('../../store/sqlite/sqlite-vacuum.js');
    const plan = planSqliteVacuum(path);
    process.stderr.write(
      `vacuuming ${plan.path}: ${mb(plan.bytes)}, about ${mb(plan.freeBytes)} of it free pages; ${mb(plan.availableBytes)} free on its disk, ${mb(plan.neededBytes)} needed.\n` +
        'VACUUM holds the write lock until it ends: stop the worker and the api first (pm2 stop h2h-worker h2h-api), or their writes wait and are retried.\n',
    );
    const summary = {
      backend: 'sqlite',
      ...vacuumSqliteStore(plan, { lockTimeoutMs: config.dbLockTimeoutMs }),
    };
    if (flags.json) return printPublicJson(summary);
    process.stdout.write(
      `Vacuumed ${summary.path}: ${mb(summary.bytesBefore)} before, ${mb(summary.bytesAfter)} after ` +
        `(${mb(Math.max(0, summary.bytesBefore - summary.bytesAfter))} given back) in ${(summary.durationMs / 1000).toFixed(1)} s.\n`,
    );
  });
