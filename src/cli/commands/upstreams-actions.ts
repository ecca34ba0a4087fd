import type { Redis } from 'ioredis';
import type { PublicBalanceDrift, PublicUpstreamBalance } from '../../catalog/public-catalog.js';
import { budgetSettings, type Config } from '../../config/config.js';
import { type BudgetUsage, RateBudget } from '../../rate-budget/rate-budget.js';
import { connectRedis } from '../../shared/redis-connection.js';
import type { OrderStore } from '../../store/order-store.js';
import { type OpenCircuit, UpstreamCircuit } from '../../store/upstream-circuit.js';
import type { UpstreamAccount } from '../../upstream/upstreams.js';
import { openContext } from '../context.js';
import { printPublicJson, renderTable, runAction } from '../output.js';
import { signedAmount } from './drift-text.js';
import { formatAge } from './status-actions.js';

/**
 * One upstream as `h2h-sync upstreams` shows it. `--json` prints the list in the public form
 * (snake_case, ISO times; docs/cli.md); a budget Redis did not answer for is null there, and
 * stderr says why.
 */
export interface UpstreamView {
  name: string;
  baseUrl: string | null;
  /** Its circuit: null while it may be called, else why not (docs/reconciler.md, "The circuit"). */
  circuit: OpenCircuit | null;
  /** Its balance as accounted locally since its last profile read (docs/api.md, "Balance"). */
  balance: PublicUpstreamBalance;
  /** Its balance drift at its last profile read (docs/api.md, "Balance drift"); null before its first. */
  drift: PublicBalanceDrift | null;
  /** When its catalog was last read, and how long ago; null before its first sync. */
  catalogSyncedAt: string | null;
  catalogAgeS: number | null;
  /** Its rate budget's current window; null without an API key or while Redis does not answer. */
  budget: BudgetUsage | null;
}

/** The budget of `account` (its key's, at its limit), as every process that calls it draws from it (createUpstream). */
function budgetOf(redis: Redis, account: UpstreamAccount, config: Config): RateBudget {
  return new RateBudget({ redis, apiKey: account.apiKey!, ...budgetSettings(config, account.rateLimit) });
}

async function viewOf(store: OrderStore, account: UpstreamAccount, now: number): Promise<UpstreamView> {
  const syncedAt = await store.catalog.syncedAt(account.name);
  return {
    name: account.name,
    baseUrl: account.baseUrl ?? null,
    circuit: await new UpstreamCircuit(store.context, account.name).state(),
    balance: await store.balance.viewOf(account.name),
    drift: (await store.balance.driftOf(account.name)) ?? null,
    catalogSyncedAt: syncedAt === null ? null : new Date(syncedAt).toISOString(),
    catalogAgeS: syncedAt === null ? null : Math.round((now - syncedAt) / 1000),
    budget: null,
  };
}

function printUpstreams(views: readonly UpstreamView[]): void {
  const amount = (n: number | null) => (n === null ? 'unknown' : n.toLocaleString('en-US'));
  const out = [
    renderTable(views, [
      { header: 'Upstream', cell: (v) => v.name },
      {
        header: 'Circuit',
        cell: (v) => (v.circuit ? `OPEN (${v.circuit.cause}) ${v.circuit.code}` : 'closed'),
      },
      { header: 'Balance', cell: (v) => amount(v.balance.balance) },
      {
        header: 'Drift',
        cell: (v) =>
          v.drift === null
            ? '-'
            : `${signedAmount(v.drift.drift)}${v.drift.drift_since === null ? '' : ` since ${v.drift.drift_since}`}${v.drift.audit_steered ? ' (audit steered)' : ''}`,
      },
      {
        header: 'Catalog',
        cell: (v) => (v.catalogAgeS === null ? 'never synced' : `${formatAge(v.catalogAgeS)} ago`),
      },
      {
        header: 'Budget',
        cell: (v) => (v.budget ? `${v.budget.used}/${v.budget.limit}` : '-'),
      },
    ]),
  ];
  for (const v of views.filter((view) => view.circuit)) {
    out.push(`${v.name}: ${v.circuit!.code}: ${v.circuit!.fix ?? v.circuit!.message}`);
  }
  process.stdout.write(`${out.join('\n')}\n`);
}

/** `upstreams`: each configured upstream with its circuit, balance, catalog age and budget use. */
export const upstreams = async (flags: { json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      const now = Date.now();
      const views: UpstreamView[] = [];
      for (const account of context.config.upstreams) views.push(await viewOf(context.store!, account, now));
      // The store answers without Redis; the budgets say why they are missing.
      let budgetError: string | undefined;
      try {
        const redis = await connectRedis(context.config.redisUrl);
        try {
          for (const [i, account] of context.config.upstreams.entries()) {
            if (account.apiKey) views[i]!.budget = await budgetOf(redis, account, context.config).used();
          }
        } finally {
          redis.disconnect();
        }
      } catch (error) {
        budgetError = (error as Error).message;
      }
      if (budgetError !== undefined) process.stderr.write(`budgets unavailable: ${budgetError}\n`);
      if (flags.json) {
        printPublicJson(views);
        return;
      }
      printUpstreams(views);
    } finally {
      await context.close();
    }
  });
};
