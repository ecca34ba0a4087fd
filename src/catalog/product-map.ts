import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../config/config-error.js';

/**
 * The product map (docs/upstreams.md, "Products"): the file named by `H2H_PRODUCT_MAP_FILE`,
 * which links products whose codes differ between upstreams. Without it, products with the same
 * code on several upstreams are candidates for one another; an entry says that the shop's code
 * `code` is, on each upstream it names, that upstream's own code. Read once by `loadConfig`; a
 * leaf module (zod and node only).
 */

/** One entry: the shop's product code, and the code each named upstream sells it under. */
export interface ProductLink {
  code: string;
  /** Upstream name → that upstream's product code. An upstream not named sells it as `code`. */
  upstreams: Readonly<Record<string, string>>;
}

const codeSchema = z.string().min(1, 'must be a non-empty product code');

const fileSchema = z.strictObject({
  products: z.array(
    z.strictObject({
      code: codeSchema,
      upstreams: z.record(z.string(), codeSchema).refine((upstreams) => Object.keys(upstreams).length > 0, {
        message: 'must name at least one upstream and its code',
      }),
    }),
  ),
});

/**
 * The links of the file at `file` (undefined: none), checked against the configured upstreams'
 * `names`. Throws {@link ConfigError} naming the file, the entry and the field: a file that
 * cannot be read or is not JSON, a field of the wrong shape, an upstream that is not configured,
 * a shop code listed twice, and an upstream's code that two entries claim.
 */
export function readProductLinks(file: string | undefined, names: readonly string[]): ProductLink[] {
  if (file === undefined) return [];
  const path = resolve(file);
  const problem = (message: string) =>
    new ConfigError(`H2H_PRODUCT_MAP_FILE ${path} is not valid: ${message} (docs/upstreams.md, "Products")`);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw problem(
      code === undefined ? `it is not JSON (${(error as Error).message})` : `it cannot be read (${code})`,
    );
  }
  const parsed = fileSchema.safeParse(json);
  if (!parsed.success) {
    throw problem(
      parsed.error.issues.map((issue) => `${where(json, issue.path)}: ${issue.message}`).join('; '),
    );
  }
  const entries = parsed.data.products;
  const known = new Set(names);
  const issues: string[] = [];
  const shopCodes = new Map<string, number>();
  const claimed = new Map<string, number>();
  entries.forEach((entry, i) => {
    const at = `products[${i}] ("${entry.code}")`;
    const first = shopCodes.get(entry.code);
    if (first !== undefined)
      issues.push(`${at}.code: "${entry.code}" is listed twice (also products[${first}])`);
    else shopCodes.set(entry.code, i);
    for (const [upstream, code] of Object.entries(entry.upstreams)) {
      if (!known.has(upstream)) {
        issues.push(
          `${at}.upstreams.${upstream}: no upstream is named "${upstream}" (configured: ${[...known].join(', ')})`,
        );
        continue;
      }
      const key = `${upstream}\u0000${code}`;
      const other = claimed.get(key);
      if (other !== undefined) {
        issues.push(`${at}.upstreams.${upstream}: "${code}" is already products[${other}]'s on ${upstream}`);
      } else claimed.set(key, i);
    }
  });
  if (issues.length > 0) throw problem(issues.join('; '));
  return entries;
}

/** `products[2] ("ML-86").upstreams.beta` for an issue's path, naming the entry by its code when it has one. */
function where(json: unknown, path: readonly PropertyKey[]): string {
  const [list, index, ...field] = path;
  if (list !== 'products' || typeof index !== 'number') return path.map(String).join('.') || 'the file';
  const raw = (json as { products?: { code?: unknown }[] }).products?.[index];
  const named = typeof raw?.code === 'string' ? ` ("${raw.code}")` : '';
  return `products[${index}]${named}${field.map((f) => `.${String(f)}`).join('')}`;
}

/**
 * How the shop's product codes and each upstream's meet: {@link ProductLinks.codeOn} the code a
 * shop code has on an upstream, {@link ProductLinks.shopCodeOf} the shop code of an upstream's
 * product. Pure, from the links of {@link readProductLinks}.
 */
export class ProductLinks {
  readonly #toUpstream = new Map<string, Map<string, string>>();
  readonly #toShop = new Map<string, string>();

  constructor(links: readonly ProductLink[] = []) {
    for (const link of links) {
      this.#toUpstream.set(link.code, new Map(Object.entries(link.upstreams)));
      for (const [upstream, code] of Object.entries(link.upstreams)) {
        this.#toShop.set(`${upstream}\u0000${code}`, link.code);
      }
    }
  }

  /** The code `upstream` sells the shop's product `shopCode` under: the map's, else the same code. */
  codeOn(upstream: string, shopCode: string): string {
    return this.#toUpstream.get(shopCode)?.get(upstream) ?? shopCode;
  }

  /**
   * The shop's code of `upstream`'s product `code`: the entry that links it, else its own code;
   * undefined when the map gives `code` on that upstream to another product (the shop reaches
   * that one only, so this product is offered under no code).
   */
  shopCodeOf(upstream: string, code: string): string | undefined {
    const linked = this.#toShop.get(`${upstream}\u0000${code}`);
    if (linked !== undefined) return linked;
    return this.codeOn(upstream, code) === code ? code : undefined;
  }
}
