import { migrateToPostgres } from '../../store/migrate-to-postgres.js';
import { type OpenedStore, openStore } from '../../store/open-store.js';
import { StoreError } from '../../store/store-error.js';
import { parseStoreUrl, redactUrl } from '../../store/store-url.js';
import { openContext } from '../context.js';
import { renderTable, runAction } from '../output.js';

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
