import type { BudgetPriority } from '../rate-budget/rate-budget.js';
import type { CatalogSyncResult } from '../store/catalog.js';
import type { OrderStore } from '../store/order-store.js';
import type { UpstreamClient } from '../upstream/client.js';
import { DEFAULT_UPSTREAM } from '../upstream/model.js';
import type { PublicBalanceDrift, PublicUpstreamBalance } from './public-catalog.js';

/** What a catalog sync did (printed by `h2h-sync catalog sync --json`, returned by the refresh job). */
export interface CatalogSyncSummary {
  /** The upstream it read. */
  upstream: string;
  synced_at: string;
  categories: number;
  products: number;
  /** Each product whose price changed, with `previous_price`: one `product.price_changed` event each. */
  price_changes: CatalogSyncResult['priceChanges'];
  /** The upstream's balance after the sync: the profile just read, nothing accounted yet. */
  balance: PublicUpstreamBalance;
  /**
   * The upstream's balance drift at that profile read (docs/api.md, "Balance drift"): its
   * profile balance against the balance h2h-sync expected; null before a first read.
   */
  drift: PublicBalanceDrift | null;
  /**
   * True when another sync that read the upstream later had committed first: this one wrote
   * nothing (`synced_at` is the newer one's read time, the counts are 0).
   */
  skipped: boolean;
}

export interface SyncCatalogOptions {
  store: Pick<OrderStore, 'catalog' | 'balance'>;
  /** The upstream it reads (docs/upstreams.md). Default: `default`. */
  upstream?: string;
  /** That upstream's client, with its rate budget. */
  client: UpstreamClient;
  /**
   * The budget priority of its three calls. Default `poll`: a slot of the poll share, taken
   * without waiting, so a sync never takes creation's reserve; a spent share throws
   * `BudgetExhaustedError` (the refresh job tries again when a slot frees).
   */
  priority?: BudgetPriority;
  /** The clock of the read times (ms); default Date.now. */
  now?: () => number;
}

/**
 * Refreshes one upstream's local catalog and balance (docs/api.md, "Catalog and balance"): GET
 * /categories, GET /products and GET /profile (last, so the least time passes between the read
 * and the write that starts the accounting from it), then one transaction that replaces that
 * upstream's catalog, appends a `product.price_changed` event per changed price, and resets its
 * balance.
 * An upstream error throws before anything is written. The read times go with the snapshot: a
 * sync whose reads are older than the stored catalog's (two syncs at once, committed out of
 * order) writes nothing.
 */
export async function syncCatalog(options: SyncCatalogOptions): Promise<CatalogSyncSummary> {
  const { store, client } = options;
  const upstream = options.upstream ?? DEFAULT_UPSTREAM;
  const priority = options.priority ?? 'poll';
  const now = options.now ?? Date.now;
  const readAt = now();
  const categories = await client.categories({ priority });
  const products = await client.products({ priority });
  const profileReadAt = now();
  const profile = await client.profile({ priority });
  const result = await store.catalog.applySync({
    upstream,
    readAt,
    categories,
    products,
    profile: { balance: profile.member_balance, readAt: profileReadAt },
  });
  return {
    upstream,
    synced_at: new Date(result.syncedAt).toISOString(),
    categories: result.categories,
    products: result.products,
    price_changes: result.priceChanges,
    balance: await store.balance.viewOf(upstream),
    drift: (await store.balance.driftOf(upstream)) ?? null,
    skipped: result.skipped,
  };
}
