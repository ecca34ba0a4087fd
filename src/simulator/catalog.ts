import { z } from 'zod';
import type { Category, Product } from '../upstream/model.js';
import { amountSchema, type CatalogProduct, type FixtureCategory } from './fixture.js';

/** Body of `PATCH /__sim/products/:code`: any of these fields; an unknown key is an error. */
export const productPatchSchema = z
  .strictObject({
    /** The list price. */
    price: amountSchema,
    /** The prices by member role; replaces the whole map (`{}`: every role pays `price`). */
    role_prices: z.record(z.string(), amountSchema),
    is_active: z.boolean(),
  })
  .partial();
export type ProductPatch = z.output<typeof productPatchSchema>;

/**
 * The categories and products of the fixture, indexed for the order path. The control API may
 * change a product's price or activity ({@link Catalog.patchProduct}); {@link Catalog.reset}
 * goes back to the fixture.
 */
export class Catalog {
  private readonly categoriesByCode: ReadonlyMap<string, FixtureCategory>;
  private readonly productsById = new Map<string, CatalogProduct>();
  private readonly productsByCode = new Map<string, CatalogProduct>();
  private products: CatalogProduct[] = [];

  constructor(
    private readonly categories: readonly FixtureCategory[],
    private readonly fixtureProducts: readonly CatalogProduct[],
  ) {
    this.categoriesByCode = new Map(categories.map((category) => [category.code, category]));
    this.reset();
  }

  /** Back to the fixture's products. */
  reset(): void {
    this.products = [...this.fixtureProducts];
    this.productsById.clear();
    this.productsByCode.clear();
    for (const product of this.products) this.#index(product);
  }

  /**
   * Changes a product (a new object: orders keep the product they were placed with, and the
   * fixture stays as loaded). Returns the product after the change, or undefined for an unknown code.
   */
  patchProduct(code: string, patch: ProductPatch): CatalogProduct | undefined {
    const current = this.productsByCode.get(code);
    if (!current) return undefined;
    const next: CatalogProduct = { ...current, ...patch };
    this.products[this.products.indexOf(current)] = next;
    this.#index(next);
    return next;
  }

  #index(product: CatalogProduct): void {
    this.productsById.set(product.id.toLowerCase(), product);
    this.productsByCode.set(product.code, product);
  }

  findProductById(id: string): CatalogProduct | undefined {
    return this.productsById.get(id.toLowerCase());
  }

  findProductByCode(code: string): CatalogProduct | undefined {
    return this.productsByCode.get(code);
  }

  /** Active, enabled for the API, and in an active category (spec §2: "Products must be active..."). */
  isOrderable(product: CatalogProduct): boolean {
    return product.is_active && product.api_enabled && this.isCategoryActive(product.category_code);
  }

  /** GET /categories: every category, inactive ones included. */
  listCategories(): Category[] {
    return this.categories.map(({ name, code, sub_name, logo, is_active }) => ({
      name,
      code,
      sub_name,
      logo,
      is_active,
    }));
  }

  /**
   * GET /products for a member of `role`: every product (inactive ones included, optionally of one
   * category), priced for the role. `is_active` is {@link isOrderable}: false when the product or
   * its category is off, or the product is not enabled for the API (so a client that checks it
   * refuses what POST /orders would refuse).
   * `target` (an extension to the contract, docs/simulator.md) publishes the product's target
   * rules; a product without rules has none.
   */
  listProducts(role: string, categoryCode?: string): Product[] {
    const result: Product[] = [];
    for (const product of this.products) {
      if (categoryCode !== undefined && product.category_code !== categoryCode) continue;
      result.push({
        id: product.id,
        code: product.code,
        name: product.name,
        category_code: product.category_code,
        price: priceFor(product, role),
        is_active: this.isOrderable(product),
        ...(Object.keys(product.target).length > 0 ? { target: { ...product.target } } : {}),
      });
    }
    return result;
  }

  private isCategoryActive(code: string): boolean {
    return this.categoriesByCode.get(code)?.is_active === true;
  }
}

/** The price a member of `role` pays: the role's price when the product has one, else the list price. */
export function priceFor(product: CatalogProduct, role: string): number {
  return Object.hasOwn(product.role_prices, role) ? product.role_prices[role]! : product.price;
}
