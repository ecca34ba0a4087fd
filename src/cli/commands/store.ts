import type { Command } from 'commander';

/** What the command does, loaded when it runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./store-actions.js');

/** Registers `store migrate --to postgres://…` (docs/deployment.md, "Moving a SQLite store to PostgreSQL"). */
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
}
