import type { OrderData } from '../upstream/model.js';
import type { Catalog } from './catalog.js';
import type { CatalogProduct } from './fixture.js';
import type { ValidOrderInput } from './order-input.js';
import { upstreamError } from './sim-errors.js';

/** A `data.user_id` ending in this is refused as INVALID_TARGET (a magic suffix, docs/simulator.md). */
export const REFUSED_USER_ID_SUFFIX = '0000';

/**
 * The product an order names, if it may be ordered through the API (spec §4 rule 6). When both
 * product_id and product_code are given they must name the same product. Throws INVALID_PRODUCT.
 */
export function resolveOrderableProduct(
  catalog: Catalog,
  input: Pick<ValidOrderInput, 'product_id' | 'product_code'>,
): CatalogProduct {
  const byId = input.product_id === undefined ? undefined : catalog.findProductById(input.product_id);
  const byCode = input.product_code === undefined ? undefined : catalog.findProductByCode(input.product_code);
  if (input.product_id !== undefined && input.product_code !== undefined && byId !== byCode) {
    throw upstreamError('INVALID_PRODUCT', 'product_id and product_code name different products');
  }
  const product = byId ?? byCode;
  const named = input.product_id !== undefined ? 'product_id' : 'product_code';
  if (!product) throw upstreamError('INVALID_PRODUCT', `${named}: no such product`);
  if (!catalog.isOrderable(product)) {
    throw upstreamError('INVALID_PRODUCT', `${named}: the product is not available through the API`);
  }
  return product;
}

/**
 * Validates `data` against the product's target rules (spec §4 rule 3): every key of the rules
 * must be present and match. Throws INVALID_TARGET naming the field.
 */
export function checkTarget(product: CatalogProduct, data: OrderData): void {
  for (const { key, pattern } of product.targetRules) {
    const value = Object.hasOwn(data, key) ? data[key] : undefined;
    if (value === undefined)
      throw upstreamError('INVALID_TARGET', `data.${key}: is required for this product`);
    if (!pattern.test(value)) {
      throw upstreamError('INVALID_TARGET', `data.${key}: does not match ${pattern.source}`);
    }
  }
  if (data.user_id?.endsWith(REFUSED_USER_ID_SUFFIX)) {
    throw upstreamError('INVALID_TARGET', 'data.user_id: the game reports no such account');
  }
}
