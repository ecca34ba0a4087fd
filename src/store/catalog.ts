import type { ProductLinks } from '../catalog/product-map.js';
import type {
  ProductPriceChange,
  PublicCategory,
  PublicProduct,
  PublicShopProduct,
} from '../catalog/public-catalog.js';
import {
  type Category,
  DEFAULT_UPSTREAM,
  isDefaultUpstream,
  type Product,
  type ProductTarget,
} from '../upstream/model.js';
import type { BalanceLedger } from './balance.js';
import type { ChangeFeed } from './feed.js';
import type { SqlExecutor } from './sql/executor.js';
import type { StoreContext } from './store-context.js';

/**
 * The local catalog (docs/api.md, "Catalog and balance"): each upstream's categories and products
 * of its last catalog sync, so the shop API answers GET /v1/products and checks new orders without
 * an upstream call. A sync of one upstream replaces that upstream's catalog whole, in one
 * transaction with its profile's balance and the `product.price_changed` events of the prices it
 * found changed. A shop product (the code the shop orders) has a candidate on each upstream that
 * sells it: the product of the same code, or of the code the product map links (product-map.ts).
 */

/** What one catalog sync read from an upstream. */
export interface CatalogSnapshot {
  /** The upstream it read (docs/upstreams.md). Default: `default`. */
  upstream?: string;
  /**
   * When the sync started reading the upstream (ms, just before GET /categories): the catalog is
   * as the upstream was then. A snapshot read before the stored one's is not applied.
   */
  readAt: number;
  categories: readonly Category[];
  products: readonly Product[];
  /**
   * GET /profile's `member_balance` (read last, just before this write) and when it was requested
   * (ms); absent: the balance is left as is.
   */
  profile?: { balance: number; readAt: number };
}

/** What a sync changed. */
export interface CatalogSyncResult {
  categories: number;
  products: number;
  /** The products whose price differs from the previous sync's (one event each). */
  priceChanges: ProductPriceChange[];
  /** The read time of the catalog now stored: this snapshot's, or when skipped the newer one's. */
  syncedAt: number;
  /**
   * True when a snapshot read later had already been applied (two syncs at once, committed out of
   * order): this one changed nothing and appended no event; the counts are then 0.
   */
  skipped: boolean;
}

interface ProductRow {
  upstream: string;
  id: string;
  code: string;
  name: string;
  category_code: string;
  price: number;
  is_active: number;
  target: string | null;
}

interface CategoryRow {
  upstream: string;
  code: string;
  name: string;
  sub_name: string;
  logo: string;
  is_active: number;
}

function toPublicProduct(row: ProductRow): PublicProduct {
  return {
    id: row.id,
    code: row.code,
    name: row.name,
    category_code: row.category_code,
    price: row.price,
    is_active: row.is_active === 1,
    target: row.target === null ? null : (JSON.parse(row.target) as ProductTarget),
  };
}

/**
 * Whether the upstream lists a product or category as active: only an explicit `false` says it
 * is not. The spec shows no product field beyond code, id and price, so an upstream may omit
 * `is_active`; reading its absence as "inactive" would refuse every order. A product it does not
 * allow is still refused upstream (INVALID_PRODUCT).
 */
const listedActive = (record: { is_active?: unknown }): 0 | 1 => (record.is_active === false ? 0 : 1);

/** A product's published target rules, or null: an empty or malformed one counts as not published. */
function publishedTarget(product: Product): string | null {
  const target = product.target;
  if (target === null || typeof target !== 'object' || Array.isArray(target)) return null;
  const rules = Object.entries(target).filter(([, pattern]) => typeof pattern === 'string');
  return rules.length === 0 ? null : JSON.stringify(Object.fromEntries(rules));
}

/** The products' order: by category, price and code, the codes by their bytes on every backend. */
const productOrder = ({ dialect }: Pick<SqlExecutor, 'dialect'>) =>
  `ORDER BY ${dialect.byteOrder('category_code')}, price, ${dialect.byteOrder('code')}, ${dialect.byteOrder('upstream')}`;

/**
 * One upstream's offer of a shop product ({@link LocalCatalog.candidates}): what routing chooses
 * among. Times in ms.
 */
export interface ProductCandidate {
  upstream: string;
  /** The upstream's own id and code of the product (the code to send it). */
  productId: string;
  productCode: string;
  name: string;
  categoryCode: string;
  /** This account's price on that upstream. */
  price: number;
  /** Whether the upstream's last sync listed it as active. */
  isActive: boolean;
  /** The upstream's published target rules, or null. */
  target: ProductTarget | null;
  /** When that upstream's catalog was read (its last sync's read time). */
  syncedAt: number;
}

function toCandidate(row: ProductRow, syncedAt: number): ProductCandidate {
  return {
    upstream: row.upstream,
    productId: row.id,
    productCode: row.code,
    name: row.name,
    categoryCode: row.category_code,
    price: row.price,
    isActive: row.is_active === 1,
    target: row.target === null ? null : (JSON.parse(row.target) as ProductTarget),
    syncedAt,
  };
}

/** Cheapest first, then by upstream name (bytes): the order candidates are listed in. */
const byPrice = (a: ProductCandidate, b: ProductCandidate) =>
  a.price - b.price || (a.upstream < b.upstream ? -1 : a.upstream > b.upstream ? 1 : 0);

/** The candidate a shop product shows: the cheapest active one, else the cheapest ({@link byPrice} order). */
function shownCandidate<C extends { isActive: boolean }>(candidates: readonly C[]): C | undefined {
  return candidates.find((c) => c.isActive) ?? candidates[0];
}

export class LocalCatalog {
  readonly #context: StoreContext;
  readonly #feed: ChangeFeed;
  readonly #ledger: BalanceLedger;
  readonly #links: ProductLinks;

  constructor(context: StoreContext, feed: ChangeFeed, ledger: BalanceLedger, links: ProductLinks) {
    this.#context = context;
    this.#feed = feed;
    this.#ledger = ledger;
    this.#links = links;
  }

  /**
   * Replaces the catalog of the snapshot's upstream with what its sync read, and starts that
   * upstream's balance accounting again from the profile it read, in one immediate transaction; a
   * product whose price changed since that upstream's previous sync (same id) appends one
   * `product.price_changed` event. A product the upstream no longer lists is gone from its
   * catalog. A snapshot read before the upstream's stored one (`readAt` older than its
   * `catalog_sync.synced_at`) is skipped in that same transaction: nothing is written and no event
   * appended, so two syncs committed out of order never turn a price back and forth. Other
   * upstreams' catalogs are untouched.
   */
  applySync(snapshot: CatalogSnapshot): Promise<CatalogSyncResult> {
    return this.#context.db.write((tx) => this.#applySync(tx, snapshot), { feed: true });
  }

  /**
   * When `upstream`'s catalog was read (ms: its last sync's read time, not its commit), or null
   * when never synced. Without an upstream: the oldest of the synced upstreams' (how stale the
   * catalog may be), null when none was ever synced: then nothing is checked locally.
   */
  async syncedAt(upstream?: string): Promise<number | null> {
    const times = await this.#syncTimes();
    if (upstream !== undefined) return times.get(upstream) ?? null;
    return times.size === 0 ? null : Math.min(...times.values());
  }

  /** The categories of every upstream, one per code (the default upstream's, else the first upstream's by name); active when any upstream's is. */
  async categories(): Promise<PublicCategory[]> {
    const { db } = this.#context;
    const rows = await db.all<CategoryRow>(
      `SELECT * FROM catalog_categories ORDER BY ${db.dialect.byteOrder('code')}, ${db.dialect.byteOrder('upstream')}`,
    );
    const byCode = new Map<string, { shown: CategoryRow; active: boolean }>();
    for (const row of rows) {
      const seen = byCode.get(row.code);
      if (seen === undefined) byCode.set(row.code, { shown: row, active: row.is_active === 1 });
      else {
        if (isDefaultUpstream(row.upstream)) seen.shown = row;
        seen.active ||= row.is_active === 1;
      }
    }
    return [...byCode.values()].map(({ shown: { upstream: _, ...category }, active }) => ({
      ...category,
      is_active: active,
    }));
  }

  /**
   * The shop's products, each once with its candidates, by the category, price and code of the
   * candidate it shows ({@link shownCandidate}); of one category when given (the shown
   * candidate's).
   */
  async products(categoryCode?: string): Promise<PublicShopProduct[]> {
    const { db } = this.#context;
    const rows = await db.all<ProductRow>(`SELECT * FROM catalog_products ${productOrder(db)}`);
    const times = await this.#syncTimes();
    const groups = new Map<string, { rows: ProductRow[]; candidates: ProductCandidate[] }>();
    for (const row of rows) {
      const shopCode = this.#links.shopCodeOf(row.upstream, row.code);
      if (shopCode === undefined) continue;
      let group = groups.get(shopCode);
      if (group === undefined) {
        group = { rows: [], candidates: [] };
        groups.set(shopCode, group);
      }
      group.candidates.push(toCandidate(row, times.get(row.upstream) ?? 0));
      group.rows.push(row);
    }
    // Each shop product takes the place of the row it shows, in the rows' order.
    const position = new Map(rows.map((row, i) => [row, i]));
    return [...groups.entries()]
      .map(([code, group]) => {
        const sorted = [...group.candidates].sort(byPrice);
        const shown = shownCandidate(sorted)!;
        const row = group.rows[group.candidates.indexOf(shown)]!;
        return { at: position.get(row)!, product: toShopProduct(code, sorted, shown) };
      })
      .filter(({ product }) => categoryCode === undefined || product.category_code === categoryCode)
      .sort((a, b) => a.at - b.at)
      .map(({ product }) => product);
  }

  /**
   * The shop product of this code, or of this id (one upstream's product: the shop product it is
   * a candidate of), if some upstream's last sync listed it.
   */
  async shopProduct(ref: { code: string } | { id: string }): Promise<PublicShopProduct | undefined> {
    let code: string | undefined;
    if ('code' in ref) code = ref.code;
    else {
      // The upstream's ids are UUIDs: compared without case, as the simulator does.
      const row = await this.#context.db.get<ProductRow>(
        'SELECT * FROM catalog_products WHERE lower(id) = lower(@id) ORDER BY upstream LIMIT 1',
        { id: ref.id },
      );
      code = row ? this.#links.shopCodeOf(row.upstream, row.code) : undefined;
    }
    if (code === undefined) return undefined;
    const candidates = await this.candidates({ code });
    const shown = shownCandidate(candidates);
    return shown ? toShopProduct(code, candidates, shown) : undefined;
  }

  /**
   * `upstream`'s product of this code or id (the code first; default: the default upstream's), if
   * its last sync listed it: one upstream's own product, not the shop's ({@link shopProduct}).
   */
  async find(
    ref: { code?: string | null; id?: string | null },
    upstream: string = DEFAULT_UPSTREAM,
  ): Promise<PublicProduct | undefined> {
    const { db } = this.#context;
    const row =
      (ref.code
        ? await db.get<ProductRow>(
            'SELECT * FROM catalog_products WHERE upstream = @upstream AND code = @code',
            {
              upstream,
              code: ref.code,
            },
          )
        : undefined) ??
      (ref.id
        ? await db.get<ProductRow>(
            'SELECT * FROM catalog_products WHERE upstream = @upstream AND lower(id) = lower(@id)',
            { upstream, id: ref.id },
          )
        : undefined);
    return row ? toPublicProduct(row) : undefined;
  }

  /**
   * Every upstream's offer of the shop product `code`: on each upstream, its product of the code
   * the product map gives it there (the same code unless the map links another), active or not,
   * with that upstream's last sync time; cheapest first, then by upstream name. Empty when no
   * upstream's last sync listed it.
   */
  async candidates({ code }: { code: string }): Promise<ProductCandidate[]> {
    const { db } = this.#context;
    const upstreams = [...(await this.#syncTimes()).entries()];
    const found: ProductCandidate[] = [];
    for (const [upstream, syncedAt] of upstreams) {
      const own = this.#links.codeOn(upstream, code);
      // A code the map gives to another shop product on this upstream is not this one's.
      if (this.#links.shopCodeOf(upstream, own) !== code) continue;
      const row = await db.get<ProductRow>(
        'SELECT * FROM catalog_products WHERE upstream = @upstream AND code = @own',
        { upstream, own },
      );
      if (row) found.push(toCandidate(row, syncedAt));
    }
    return found.sort(byPrice);
  }

  /** Each synced upstream's read time. */
  async #syncTimes(): Promise<Map<string, number>> {
    const rows = await this.#context.db.all<{ upstream: string; synced_at: number }>(
      'SELECT upstream, synced_at FROM catalog_sync',
    );
    return new Map(rows.map((row) => [row.upstream, row.synced_at]));
  }

  async #applySync(tx: SqlExecutor, snapshot: CatalogSnapshot): Promise<CatalogSyncResult> {
    const now = this.#context.now();
    const upstream = snapshot.upstream ?? DEFAULT_UPSTREAM;
    const stored = await tx.get<{ synced_at: number }>(
      'SELECT synced_at FROM catalog_sync WHERE upstream = @upstream',
      { upstream },
    );
    if (stored && snapshot.readAt < stored.synced_at) {
      return { categories: 0, products: 0, priceChanges: [], syncedAt: stored.synced_at, skipped: true };
    }
    const before = new Map(
      (
        await tx.all<ProductRow>('SELECT * FROM catalog_products WHERE upstream = @upstream', { upstream })
      ).map((row) => [row.id, row]),
    );
    await tx.run('DELETE FROM catalog_products WHERE upstream = @upstream', { upstream });
    await tx.run('DELETE FROM catalog_categories WHERE upstream = @upstream', { upstream });
    for (const category of snapshot.categories) {
      await tx.run(
        `INSERT INTO catalog_categories (upstream, code, name, sub_name, logo, is_active)
         VALUES (@upstream, @code, @name, @sub_name, @logo, @is_active)`,
        {
          upstream,
          code: category.code,
          name: category.name,
          sub_name: category.sub_name ?? '',
          logo: category.logo ?? '',
          is_active: listedActive(category),
        },
      );
    }
    const priceChanges: ProductPriceChange[] = [];
    for (const product of snapshot.products) {
      const row: ProductRow = {
        upstream,
        id: product.id,
        code: product.code,
        name: product.name,
        category_code: product.category_code,
        price: product.price,
        is_active: listedActive(product),
        target: publishedTarget(product),
      };
      await tx.run(
        `INSERT INTO catalog_products (upstream, id, code, name, category_code, price, is_active, target)
         VALUES (@upstream, @id, @code, @name, @category_code, @price, @is_active, @target)`,
        row,
      );
      const previous = before.get(row.id);
      if (previous !== undefined && previous.price !== row.price) {
        const change = { ...toPublicProduct(row), upstream, previous_price: previous.price };
        await this.#feed.appendOther(tx, 'product.price_changed', change, now);
        priceChanges.push(change);
      }
    }
    await tx.run(
      `INSERT INTO catalog_sync (upstream, synced_at) VALUES (@upstream, @readAt)
       ON CONFLICT (upstream) DO UPDATE SET synced_at = excluded.synced_at`,
      { upstream, readAt: snapshot.readAt },
    );
    if (snapshot.profile) {
      await this.#ledger.refreshInTx(tx, upstream, snapshot.profile.balance, snapshot.profile.readAt);
    }
    return {
      categories: snapshot.categories.length,
      products: snapshot.products.length,
      priceChanges,
      syncedAt: snapshot.readAt,
      skipped: false,
    };
  }
}

/** The shop product `code` as GET /v1/products shows it: the shown candidate's fields, every candidate. */
function toShopProduct(
  code: string,
  candidates: readonly ProductCandidate[],
  shown: ProductCandidate,
): PublicShopProduct {
  return {
    id: shown.productId,
    code,
    name: shown.name,
    category_code: shown.categoryCode,
    price: shown.price,
    is_active: candidates.some((c) => c.isActive),
    target: shown.target,
    candidates: candidates.map((c) => ({
      upstream: c.upstream,
      product_code: c.productCode,
      price: c.price,
      available: c.isActive,
    })),
  };
}
