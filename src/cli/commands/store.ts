import type { Command } from 'commander';

/** What the command does, loaded when it runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./store-actions.js');

/**
 * Registers `store migrate --to postgres://…` (docs/deployment.md, "Moving a SQLite store to
 * PostgreSQL"), `store backup PATH` and `store vacuum` (docs/store.md, "Backups" and "Vacuum").
 */
export function registerStoreCommands(program: Command): void {
  const store = program.command('store').description('the order store (docs/store.md)');

  store
    .command('migrate')
    .description(
      'copy the SQLite store (H2H_DB_URL or H2H_DB_PATH) into an empty PostgreSQL database, in one transaction; stop the apps first',
    )
    .requiredOption('--to <url>', 'the PostgreSQL database: postgres://user@host:port/db')
    .option('--json', 'print the summary as JSON')
    .action(async (flags) => (await actions()).storeMigrate(flags));

  store
    .command('backup')
    .description(
      'a consistent copy of the SQLite store while the apps run (SQLite online backup), checked before it is put at PATH; PostgreSQL: pg_dump (docs/deployment.md, "Backups")',
    )
    .argument('<path>', 'the file to write; refused when it exists, unless --force')
    .option('--force', 'replace PATH when it exists')
    .option('--json', 'print the summary as JSON')
    .action(async (path, flags) => (await actions()).storeBackup(path, flags));

  store
    .command('vacuum')
    .description(
      'give the space of deleted rows back: SQLite VACUUM (holds the write lock while it rewrites the file, needs twice its live data free; stop the worker and the api first), PostgreSQL VACUUM (ANALYZE)',
    )
    .option('--json', 'print the summary as JSON')
    .action(async (flags) => (await actions()).storeVacuum(flags));
}
