import type { ProductPriceChange, PublicCategory, PublicProduct } from '../catalog/public-catalog.js';
import type { Category, Product, ProductTarget } from '../upstream/model.js';
import type { BalanceLedger } from './balance.js';
import type { ChangeFeed } from './feed.js';
import type { SqlExecutor } from './sql/executor.js';
import type { StoreContext } from './store-context.js';

/**
 * The local catalog (docs/api.md, "Catalog and balance"): the categories and products of the
 * last catalog sync, so the shop API answers GET /v1/products and checks new orders without an
 * upstream call. A sync replaces it whole, in one transaction with the profile's balance and
 * the `product.price_changed` events of the prices it found changed.
 */

/** What one catalog sync read from the upstream. */
export interface CatalogSnapshot {
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
  id: string;
  code: string;
  name: string;
  category_code: string;
  price: number;
  is_active: number;
  target: string | null;
}

interface CategoryRow {
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
  `ORDER BY ${dialect.byteOrder('category_code')}, price, ${dialect.byteOrder('code')}`;

export class LocalCatalog {
  readonly #context: StoreContext;
  readonly #feed: ChangeFeed;
  readonly #ledger: BalanceLedger;

  constructor(context: StoreContext, feed: ChangeFeed, ledger: BalanceLedger) {
    this.#context = context;
    this.#feed = feed;
    this.#ledger = ledger;
  }

  /**
   * Replaces the catalog with what a sync read, and starts the balance's accounting again from
   * the profile it read, in one immediate transaction; a product whose price changed since the
   * previous sync (same id) appends one `product.price_changed` event. A product the upstream no
   * longer lists is gone (an order for it is refused as unknown). A snapshot read before the
   * stored one (`readAt` older than `catalog_sync.synced_at`) is skipped in that same transaction:
   * nothing is written and no event appended, so two syncs committed out of order never turn a
   * price back and forth.
   */
  applySync(snapshot: CatalogSnapshot): Promise<CatalogSyncResult> {
    return this.#context.db.write((tx) => this.#applySync(tx, snapshot), { feed: true });
  }

  /**
   * When the upstream was read for the stored catalog (ms: the last sync's read time, not its
   * commit), or null when never synced: then nothing is checked locally.
   */
  async syncedAt(): Promise<number | null> {
    const row = await this.#context.db.get<{ synced_at: number }>(
      'SELECT synced_at FROM catalog_sync WHERE id = 1',
    );
    return row?.synced_at ?? null;
  }

  async categories(): Promise<PublicCategory[]> {
    const { db } = this.#context;
    const rows = await db.all<CategoryRow>(
      `SELECT * FROM catalog_categories ORDER BY ${db.dialect.byteOrder('code')}`,
    );
    return rows.map((row) => ({ ...row, is_active: row.is_active === 1 }));
  }

  /** The products, by category, price and code; of one category when given. */
  async products(categoryCode?: string): Promise<PublicProduct[]> {
    const { db } = this.#context;
    const rows =
      categoryCode === undefined
        ? await db.all<ProductRow>(`SELECT * FROM catalog_products ${productOrder(db)}`)
        : await db.all<ProductRow>(
            `SELECT * FROM catalog_products WHERE category_code = @categoryCode ${productOrder(db)}`,
            { categoryCode },
          );
    return rows.map(toPublicProduct);
  }

  /** The product of this code or id (the code first), if the last sync listed it. */
  async find(ref: { code?: string | null; id?: string | null }): Promise<PublicProduct | undefined> {
    const { db } = this.#context;
    const row =
      (ref.code
        ? await db.get<ProductRow>('SELECT * FROM catalog_products WHERE code = @code', { code: ref.code })
        : undefined) ??
      (ref.id
        ? // The upstream's ids are UUIDs: compared without case, as the simulator does.
          await db.get<ProductRow>('SELECT * FROM catalog_products WHERE lower(id) = lower(@id)', {
            id: ref.id,
          })
        : undefined);
    return row ? toPublicProduct(row) : undefined;
  }

  async #applySync(tx: SqlExecutor, snapshot: CatalogSnapshot): Promise<CatalogSyncResult> {
    const now = this.#context.now();
    const stored = await tx.get<{ synced_at: number }>('SELECT synced_at FROM catalog_sync WHERE id = 1');
    if (stored && snapshot.readAt < stored.synced_at) {
      return { categories: 0, products: 0, priceChanges: [], syncedAt: stored.synced_at, skipped: true };
    }
    const before = new Map(
      (await tx.all<ProductRow>('SELECT * FROM catalog_products')).map((row) => [row.id, row]),
    );
    await tx.run('DELETE FROM catalog_products');
    await tx.run('DELETE FROM catalog_categories');
    for (const category of snapshot.categories) {
      await tx.run(
        `INSERT INTO catalog_categories (code, name, sub_name, logo, is_active)
         VALUES (@code, @name, @sub_name, @logo, @is_active)`,
        {
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
        id: product.id,
        code: product.code,
        name: product.name,
        category_code: product.category_code,
        price: product.price,
        is_active: listedActive(product),
        target: publishedTarget(product),
      };
      await tx.run(
        `INSERT INTO catalog_products (id, code, name, category_code, price, is_active, target)
         VALUES (@id, @code, @name, @category_code, @price, @is_active, @target)`,
        row,
      );
      const previous = before.get(row.id);
      if (previous !== undefined && previous.price !== row.price) {
        const change = { ...toPublicProduct(row), previous_price: previous.price };
        await this.#feed.appendOther(tx, 'product.price_changed', change, now);
        priceChanges.push(change);
      }
    }
    await tx.run(
      `INSERT INTO catalog_sync (id, synced_at) VALUES (1, @readAt)
       ON CONFLICT (id) DO UPDATE SET synced_at = excluded.synced_at`,
      { readAt: snapshot.readAt },
    );
    if (snapshot.profile) {
      await this.#ledger.refreshInTx(tx, snapshot.profile.balance, snapshot.profile.readAt);
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
