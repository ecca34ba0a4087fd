import type { Command } from 'commander';
import type { UpstreamClient } from '../../upstream/client.js';
import type { Category, Product, Profile } from '../../upstream/model.js';
import { openContext } from '../context.js';
import { printResult, runAction } from '../output.js';

interface JsonFlag {
  json?: boolean;
}

/** Runs `read` against the upstream client and prints its result. */
async function readUpstream<T>(
  flags: JsonFlag,
  read: (client: UpstreamClient) => Promise<T | T[]>,
  columns: Parameters<typeof printResult<T>>[2],
): Promise<void> {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ upstream: true });
    try {
      printResult(await read(context.upstream!.client), Boolean(flags.json), columns);
    } finally {
      await context.close();
    }
  });
}

/** Registers `profile`, `categories` and `products`. */
export function registerCatalogCommands(program: Command): void {
  program
    .command('profile')
    .description('show the member profile and balance')
    .option('--json', 'print JSON')
    .action((flags: JsonFlag) =>
      readUpstream<Profile>(flags, (client) => client.profile(), [
        { header: 'Member', cell: (p) => p.member_id },
        { header: 'Name', cell: (p) => p.member_name },
        { header: 'Role', cell: (p) => p.member_role },
        { header: 'Balance', cell: (p) => p.member_balance.toLocaleString('en-US') },
      ]),
    );

  program
    .command('categories')
    .description('list the product categories')
    .option('--json', 'print JSON')
    .action((flags: JsonFlag) =>
      readUpstream<Category>(flags, (client) => client.categories(), [
        { header: 'Code', cell: (c) => c.code },
        { header: 'Name', cell: (c) => c.name },
        { header: 'Publisher', cell: (c) => c.sub_name },
        { header: 'Active', cell: (c) => (c.is_active ? 'yes' : 'no') },
      ]),
    );

  program
    .command('products')
    .description('list products with the prices of this account')
    .option('--category <code>', 'only this category code')
    .option('--json', 'print JSON')
    .action((flags: JsonFlag & { category?: string }) =>
      readUpstream<Product>(flags, (client) => client.products({ categoryCode: flags.category }), [
        { header: 'Code', cell: (p) => p.code },
        { header: 'Name', cell: (p) => p.name },
        { header: 'Category', cell: (p) => p.category_code },
        { header: 'Price', cell: (p) => p.price.toLocaleString('en-US') },
        { header: 'Active', cell: (p) => (p.is_active ? 'yes' : 'no') },
        { header: 'Id', cell: (p) => p.id },
      ]),
    );
}
