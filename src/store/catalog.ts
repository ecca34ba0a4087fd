import type { Statement, Transaction } from 'better-sqlite3';
import type { ProductPriceChange, PublicCategory, PublicProduct } from '../catalog/public-catalog.js';
import type { Category, Product, ProductTarget } from '../upstream/model.js';
import type { BalanceLedger } from './balance.js';
import type { ChangeFeed } from './feed.js';
import type { OrderRows } from './order-rows.js';

/**
 * The local catalog (docs/api.md, "Catalog and balance"): the categories and products of the
 * last catalog sync, so the shop API answers GET /v1/products and checks new orders without an
 * upstream call. A sync replaces it whole, in one transaction with the profile's balance and
 * the `product.price_changed` events of the prices it found changed.
 */

/** What one catalog sync read from the upstream. */
export interface CatalogSnapshot {
  categories: readonly Category[];
  products: readonly Product[];
  /** GET /profile's `member_balance` (read last, just before this write); absent: the balance is left as is. */
  profile?: { balance: number };
}

/** What a sync changed. */
export interface CatalogSyncResult {
  categories: number;
  products: number;
  /** The products whose price differs from the previous sync's (one event each). */
  priceChanges: ProductPriceChange[];
  syncedAt: number;
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

/** A product's published target rules, or null: an empty or malformed one counts as not published. */
function publishedTarget(product: Product): string | null {
  const target = product.target;
  if (target === null || typeof target !== 'object' || Array.isArray(target)) return null;
  const rules = Object.entries(target).filter(([, pattern]) => typeof pattern === 'string');
  return rules.length === 0 ? null : JSON.stringify(Object.fromEntries(rules));
}

export class LocalCatalog {
  readonly #rows: OrderRows;
  readonly #feed: ChangeFeed;
  readonly #ledger: BalanceLedger;
  readonly #allProducts: Statement<[], ProductRow>;
  readonly #productsOf: Statement<[string], ProductRow>;
  readonly #byCode: Statement<[string], ProductRow>;
  readonly #byId: Statement<[string], ProductRow>;
  readonly #allCategories: Statement<[], CategoryRow>;
  readonly #syncedAt: Statement<[], { synced_at: number }>;
  readonly #clearProducts: Statement<[]>;
  readonly #clearCategories: Statement<[]>;
  readonly #insertProduct: Statement<[ProductRow]>;
  readonly #insertCategory: Statement<[CategoryRow]>;
  readonly #markSynced: Statement<[number]>;
  readonly #syncTx: Transaction<(snapshot: CatalogSnapshot) => CatalogSyncResult>;

  constructor(rows: OrderRows, feed: ChangeFeed, ledger: BalanceLedger) {
    this.#rows = rows;
    this.#feed = feed;
    this.#ledger = ledger;
    const { db } = rows;
    this.#allProducts = db.prepare('SELECT * FROM catalog_products ORDER BY category_code, price, code');
    this.#productsOf = db.prepare(
      'SELECT * FROM catalog_products WHERE category_code = ? ORDER BY category_code, price, code',
    );
    this.#byCode = db.prepare('SELECT * FROM catalog_products WHERE code = ?');
    // The upstream's ids are UUIDs: compared without case, as the simulator does.
    this.#byId = db.prepare('SELECT * FROM catalog_products WHERE lower(id) = lower(?)');
    this.#allCategories = db.prepare('SELECT * FROM catalog_categories ORDER BY code');
    this.#syncedAt = db.prepare('SELECT synced_at FROM catalog_sync WHERE id = 1');
    this.#clearProducts = db.prepare('DELETE FROM catalog_products');
    this.#clearCategories = db.prepare('DELETE FROM catalog_categories');
    this.#insertProduct = db.prepare(
      `INSERT INTO catalog_products (id, code, name, category_code, price, is_active, target)
       VALUES (@id, @code, @name, @category_code, @price, @is_active, @target)`,
    );
    this.#insertCategory = db.prepare(
      `INSERT INTO catalog_categories (code, name, sub_name, logo, is_active)
       VALUES (@code, @name, @sub_name, @logo, @is_active)`,
    );
    this.#markSynced = db.prepare(
      `INSERT INTO catalog_sync (id, synced_at) VALUES (1, ?)
       ON CONFLICT (id) DO UPDATE SET synced_at = excluded.synced_at`,
    );
    this.#syncTx = db.transaction((snapshot) => this.#applySync(snapshot));
  }

  /**
   * Replaces the catalog with what a sync read, and starts the balance's accounting again from
   * the profile it read, in one immediate transaction; a product whose price changed since the
   * previous sync (same id) appends one `product.price_changed` event. A product the upstream no
   * longer lists is gone (an order for it is refused as unknown).
   */
  applySync(snapshot: CatalogSnapshot): CatalogSyncResult {
    return this.#rows.write(this.#syncTx, snapshot);
  }

  /** When the catalog was last synced (ms), or null when never: then nothing is checked locally. */
  syncedAt(): number | null {
    return this.#syncedAt.get()?.synced_at ?? null;
  }

  categories(): PublicCategory[] {
    return this.#allCategories.all().map((row) => ({ ...row, is_active: row.is_active === 1 }));
  }

  /** The products, by category, price and code; of one category when given. */
  products(categoryCode?: string): PublicProduct[] {
    const rows = categoryCode === undefined ? this.#allProducts.all() : this.#productsOf.all(categoryCode);
    return rows.map(toPublicProduct);
  }

  /** The product of this code or id (the code first), if the last sync listed it. */
  find(ref: { code?: string | null; id?: string | null }): PublicProduct | undefined {
    const row =
      (ref.code ? this.#byCode.get(ref.code) : undefined) ?? (ref.id ? this.#byId.get(ref.id) : undefined);
    return row ? toPublicProduct(row) : undefined;
  }

  #applySync(snapshot: CatalogSnapshot): CatalogSyncResult {
    const now = this.#rows.now();
    const before = new Map(this.#allProducts.all().map((row) => [row.id, row]));
    this.#clearProducts.run();
    this.#clearCategories.run();
    for (const category of snapshot.categories) {
      this.#insertCategory.run({
        code: category.code,
        name: category.name,
        sub_name: category.sub_name ?? '',
        logo: category.logo ?? '',
        is_active: category.is_active ? 1 : 0,
      });
    }
    const priceChanges: ProductPriceChange[] = [];
    for (const product of snapshot.products) {
      const row: ProductRow = {
        id: product.id,
        code: product.code,
        name: product.name,
        category_code: product.category_code,
        price: product.price,
        is_active: product.is_active ? 1 : 0,
        target: publishedTarget(product),
      };
      this.#insertProduct.run(row);
      const previous = before.get(row.id);
      if (previous !== undefined && previous.price !== row.price) {
        const change = { ...toPublicProduct(row), previous_price: previous.price };
        this.#feed.appendOther('product.price_changed', change, now);
        priceChanges.push(change);
      }
    }
    this.#markSynced.run(now);
    if (snapshot.profile) this.#ledger.refreshInTx(snapshot.profile.balance, now);
    return {
      categories: snapshot.categories.length,
      products: snapshot.products.length,
      priceChanges,
      syncedAt: now,
    };
  }
}
