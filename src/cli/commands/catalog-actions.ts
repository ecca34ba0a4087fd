import { type CatalogSyncSummary, syncCatalog } from '../../catalog/catalog-sync.js';
import { ConfigError } from '../../config/config-error.js';
import { BudgetExhaustedError } from '../../rate-budget/rate-budget.js';
import type { UpstreamClient } from '../../upstream/client.js';
import type { Category, Product, ProductTarget, Profile } from '../../upstream/model.js';
import { DEFAULT_UPSTREAM } from '../../upstream/model.js';
import { openContext } from '../context.js';
import { printResult, renderTable, runAction } from '../output.js';
import { signedAmount } from './drift-text.js';

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

/** What `products` shows for a product whose target format the upstream does not publish. */
export const TARGET_NOT_PUBLISHED = 'not published by the upstream';

/**
 * A product's target format for a person: `user_id ^[0-9]{6,12}$, server_id ^[0-9]{4,5}$`, or
 * {@link TARGET_NOT_PUBLISHED}. GET /products has no target field in the upstream's contract;
 * the simulator publishes one as an extension (docs/cli.md, "Target formats").
 */
export function describeTarget(target: ProductTarget | undefined): string {
  if (target === undefined || target === null || typeof target !== 'object') return TARGET_NOT_PUBLISHED;
  const rules = Object.entries(target);
  if (rules.length === 0) return TARGET_NOT_PUBLISHED;
  return rules.map(([key, pattern]) => `${key} ${String(pattern)}`).join(', ');
}

/** A spent poll share, said for a person at the command line. */
class CatalogBudgetError extends Error {
  readonly code = 'BUDGET_EXHAUSTED';
}

/** The summary of `catalog sync` for a person. */
function printSyncSummary(summary: CatalogSyncSummary): void {
  if (summary.skipped) {
    process.stdout.write(
      `nothing written: another sync (the worker's) read the upstream later, at ${summary.synced_at}, and committed first\n`,
    );
    return;
  }
  const balance = summary.balance.balance;
  process.stdout.write(
    `${renderTable(
      [summary],
      [
        { header: 'Synced at', cell: (s) => s.synced_at },
        { header: 'Categories', cell: (s) => s.categories },
        { header: 'Products', cell: (s) => s.products },
        { header: 'Price changes', cell: (s) => s.price_changes.length },
        { header: 'Balance', cell: () => (balance === null ? '—' : balance.toLocaleString('en-US')) },
        { header: 'Drift', cell: (s) => (s.drift === null ? '—' : s.drift.drift.toLocaleString('en-US')) },
      ],
    )}\n`,
  );
  if (summary.price_changes.length > 0) {
    process.stdout.write(
      `${renderTable(summary.price_changes, [
        { header: 'Code', cell: (p) => p.code },
        { header: 'Was', cell: (p) => p.previous_price.toLocaleString('en-US') },
        { header: 'Now', cell: (p) => p.price.toLocaleString('en-US') },
      ])}\n`,
    );
  }
}

/** `catalog sync`: refreshes the local catalog and the balance now. */
export const catalogSync = async (flags: JsonFlag & { upstream?: string }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'create' });
    const store = context.store!;
    try {
      const name = flags.upstream ?? DEFAULT_UPSTREAM;
      const upstream = await context.openUpstream(name);
      const summary = await syncCatalog({ store, client: upstream.client, upstream: name }).catch((error) => {
        if (!(error instanceof BudgetExhaustedError)) throw error;
        throw new CatalogBudgetError(
          `the poll share of the rate budget is spent for now (orders and polls come first): try again in ${Math.ceil(error.retryAfterMs / 1000)} s`,
        );
      });
      if (flags.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
      else printSyncSummary(summary);
    } finally {
      await context.close();
    }
  });
};

/** An upstream whose profile was never read: it has no drift to accept. */
class NoProfileReadError extends Error {
  readonly code = 'NO_PROFILE_READ';
}

/** `catalog accept-drift`: takes an upstream's balance drift as known (BalanceLedger.acceptDrift). */
export const catalogAcceptDrift = async (flags: JsonFlag & { upstream?: string }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      const name = flags.upstream ?? DEFAULT_UPSTREAM;
      const known = context.config.upstreams.map((u) => u.name);
      if (!known.includes(name)) {
        throw new ConfigError(
          `no upstream is named "${name}": the configured ones are ${known.join(', ')} (H2H_UPSTREAMS_FILE; docs/upstreams.md)`,
        );
      }
      const accepted = await context.store!.balance.acceptDrift(name);
      if (!accepted) {
        throw new NoProfileReadError(
          `upstream "${name}" has no profile read yet, so no drift: run \`h2h-sync catalog sync --upstream ${name}\` first`,
        );
      }
      if (flags.json) process.stdout.write(`${JSON.stringify(accepted, null, 2)}\n`);
      else {
        process.stdout.write(
          `accepted a drift of ${signedAmount(accepted.drift)} on ${name}: its expected balance is now its profile balance read at ${accepted.read_at}, ${accepted.profile_balance.toLocaleString('en-US')}\n`,
        );
      }
    } finally {
      await context.close();
    }
  });
};

/** `profile`: the member profile and balance, read from the upstream now. */
export const profile = (flags: JsonFlag) =>
  readUpstream<Profile>(flags, (client) => client.profile(), [
    { header: 'Member', cell: (p) => p.member_id },
    { header: 'Name', cell: (p) => p.member_name },
    { header: 'Role', cell: (p) => p.member_role },
    { header: 'Balance', cell: (p) => p.member_balance.toLocaleString('en-US') },
  ]);

/** `categories`: read from the upstream now. */
export const categories = (flags: JsonFlag) =>
  readUpstream<Category>(flags, (client) => client.categories(), [
    { header: 'Code', cell: (c) => c.code },
    { header: 'Name', cell: (c) => c.name },
    { header: 'Publisher', cell: (c) => c.sub_name },
    { header: 'Active', cell: (c) => (c.is_active ? 'yes' : 'no') },
  ]);

/** `products`: read from the upstream now, each with its target format. */
export const products = (flags: JsonFlag & { category?: string }) =>
  readUpstream<Product>(
    flags,
    async (client) =>
      // `target: null` in JSON says "not published" as plainly as the table does.
      (await client.products({ categoryCode: flags.category })).map((p) => ({
        ...p,
        target: p.target ?? null,
      })) as Product[],
    [
      { header: 'Code', cell: (p) => p.code },
      { header: 'Name', cell: (p) => p.name },
      { header: 'Category', cell: (p) => p.category_code },
      { header: 'Price', cell: (p) => p.price.toLocaleString('en-US') },
      { header: 'Active', cell: (p) => (p.is_active ? 'yes' : 'no') },
      { header: 'Target', cell: (p) => describeTarget(p.target ?? undefined) },
      { header: 'Id', cell: (p) => p.id },
    ],
  );
