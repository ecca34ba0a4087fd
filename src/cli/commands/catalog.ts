import type { Command } from 'commander';

/** What the commands do, loaded when one of them runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./catalog-actions.js');

/** Registers `profile`, `categories`, `products`, `catalog sync` and `catalog accept-drift`. */
export function registerCatalogCommands(program: Command): void {
  const catalog = program
    .command('catalog')
    .description('the local catalog the shop API answers from (docs/api.md, "Catalog and balance")');
  catalog
    .command('sync')
    .description(
      'refresh the local catalog and the balance now (3 upstream calls from the poll share of the rate budget)',
    )
    .option(
      '--upstream <name>',
      'the upstream whose catalog and balance to refresh (docs/upstreams.md)',
      'default',
    )
    .option('--json', 'print the summary as JSON')
    .action(async (flags) => (await actions()).catalogSync(flags));
  catalog
    .command('accept-drift')
    .description(
      'take an upstream\'s balance drift as known (a top-up, a transfer you made): its expected balance becomes its last profile balance, its drift episode ends (docs/operations.md, "Balance drift")',
    )
    .option('--upstream <name>', 'the upstream whose drift to accept (docs/upstreams.md)', 'default')
    .option('--json', 'print the drift accepted as JSON')
    .action(async (flags) => (await actions()).catalogAcceptDrift(flags));

  program
    .command('profile')
    .description('show the member profile and balance')
    .option('--json', 'print JSON')
    .action(async (flags) => (await actions()).profile(flags));

  program
    .command('categories')
    .description('list the product categories')
    .option('--json', 'print JSON')
    .action(async (flags) => (await actions()).categories(flags));

  program
    .command('products')
    .description('list products with the prices of this account')
    .option('--category <code>', 'only this category code')
    .option('--json', 'print JSON')
    .action(async (flags) => (await actions()).products(flags));
}
