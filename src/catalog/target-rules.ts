import type { OrderData, ProductTarget } from '../upstream/model.js';

/** Why an order's `data` does not match its product's published target rules. */
export interface TargetProblem {
  /** The data key, e.g. `user_id`. */
  field: string;
  /** The product's regular expression for it. */
  pattern: string;
  /** For a person: `data.user_id: is required for this product` or `…: does not match ^[0-9]{6,12}$`. */
  message: string;
}

/**
 * Checks `data` against a product's published target rules (data key → regular expression, read
 * with the `u` flag as the upstream publishes them): every key must be present and match; other
 * keys are left to the upstream. Rules that are not published (null) or a pattern that does not
 * compile check nothing: the upstream still does. Returns the first problem, or undefined.
 */
export function targetProblem(target: ProductTarget | null, data: OrderData): TargetProblem | undefined {
  if (target === null) return undefined;
  for (const [field, pattern] of Object.entries(target)) {
    let rule: RegExp;
    try {
      rule = new RegExp(pattern, 'u');
    } catch {
      continue;
    }
    const value = Object.hasOwn(data, field) ? data[field] : undefined;
    if (value === undefined) {
      return { field, pattern, message: `data.${field}: is required for this product (${pattern})` };
    }
    if (!rule.test(value)) return { field, pattern, message: `data.${field}: does not match ${pattern}` };
  }
  return undefined;
}
