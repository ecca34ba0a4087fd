import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { z } from 'zod';
import { normalizeIp } from './ip-address.js';
import { lognormalSchema, type RealisticSettings, realisticSettingsSchema } from './profile.js';

/**
 * The simulator's fixture: the members, categories and products it starts from (and returns to
 * on `POST /__sim/reset`). Documented field by field in docs/simulator.md.
 */

const nonEmpty = z.string().min(1, 'must be a non-empty string');
/** An amount of money: a non-negative integer in the smallest currency unit. */
export const amountSchema = z
  .number()
  .int('must be an integer (smallest currency unit)')
  .nonnegative('must be >= 0');

export const ipAddressSchema = z
  .string()
  .refine((value) => isIP(value) !== 0, 'must be an IPv4 or IPv6 address');

/** An absolute http(s) URL. */
export const httpUrlSchema = z
  .string()
  .refine((value) => isHttpUrl(value), 'must be an absolute http:// or https:// URL');

export function isHttpUrl(value: string): boolean {
  if (!URL.canParse(value)) return false;
  const { protocol } = new URL(value);
  return protocol === 'http:' || protocol === 'https:';
}

const memberSchema = z.strictObject({
  member_id: nonEmpty,
  member_name: z.string(),
  member_role: nonEmpty,
  balance: amountSchema,
  api_key: nonEmpty,
  api_secret: nonEmpty,
  h2h_enabled: z.boolean(),
  active: z.boolean(),
  ip_whitelist: z.array(ipAddressSchema),
  /** Default webhook destination; null (or absent) means the member has none. */
  webhook_url: httpUrlSchema.nullable().default(null),
});

const categorySchema = z.strictObject({
  name: z.string(),
  code: nonEmpty,
  sub_name: z.string(),
  logo: z.string(),
  is_active: z.boolean(),
});

const productSchema = z.strictObject({
  id: z.guid('must be a UUID'),
  code: nonEmpty,
  name: z.string(),
  category_code: nonEmpty,
  price: amountSchema,
  role_prices: z.record(z.string(), amountSchema).default({}),
  is_active: z.boolean(),
  api_enabled: z.boolean(),
  /** Key of `data` → regular expression its value must match. */
  target: z.record(z.string(), z.string()),
  /** This product's completion-time distribution under the realistic profile (docs/simulator.md, "Profiles"). */
  completion: lognormalSchema.optional(),
});

const fixtureSchema = z
  .strictObject({
    members: z.array(memberSchema).min(1, 'needs at least one member'),
    categories: z.array(categorySchema),
    products: z.array(productSchema),
    /** Settings of the realistic profile for this fixture; simulator options override them. */
    realistic: realisticSettingsSchema.optional(),
    /** Share (0..1) of ordinary orders (no magic suffix) that end FAILED instead of SUCCESS. */
    fail_ratio: z.number().min(0, 'must be between 0 and 1').max(1, 'must be between 0 and 1').default(0),
  })
  .superRefine((fixture, ctx) => {
    const unique = (items: readonly Record<string, unknown>[], list: string, key: string) => {
      const seen = new Set<unknown>();
      items.forEach((item, index) => {
        if (seen.has(item[key])) {
          ctx.addIssue({ code: 'custom', path: [list, index, key], message: `duplicate ${key}` });
        }
        seen.add(item[key]);
      });
    };
    unique(fixture.members, 'members', 'member_id');
    unique(fixture.members, 'members', 'api_key');
    unique(fixture.categories, 'categories', 'code');
    unique(fixture.products, 'products', 'id');
    unique(fixture.products, 'products', 'code');
    const categoryCodes = new Set(fixture.categories.map((category) => category.code));
    fixture.products.forEach((product, index) => {
      if (!categoryCodes.has(product.category_code)) {
        ctx.addIssue({
          code: 'custom',
          path: ['products', index, 'category_code'],
          message: `no category has code ${JSON.stringify(product.category_code)}`,
        });
      }
      for (const [key, pattern] of Object.entries(product.target)) {
        try {
          new RegExp(pattern, 'u');
        } catch (error) {
          ctx.addIssue({
            code: 'custom',
            path: ['products', index, 'target', key],
            message: `invalid regular expression: ${(error as Error).message}`,
          });
        }
      }
    });
  });

/** A fixture as written in JSON (optional fields may be left out). */
export type Fixture = z.input<typeof fixtureSchema>;
export type FixtureMember = z.output<typeof memberSchema>;
export type FixtureCategory = z.output<typeof categorySchema>;

/** A product with its target rules compiled once at load. */
export interface CatalogProduct extends z.output<typeof productSchema> {
  readonly targetRules: readonly { readonly key: string; readonly pattern: RegExp }[];
}

/** A validated fixture, ready to be (re)loaded into the simulator's state. */
export interface LoadedFixture {
  readonly members: readonly FixtureMember[];
  readonly categories: readonly FixtureCategory[];
  readonly products: readonly CatalogProduct[];
  /** The fixture's realistic-profile settings, with each product's own `completion` folded in. */
  readonly realistic: RealisticSettings;
  /** Share of ordinary orders that end FAILED (docs/simulator.md, "Several upstreams"). */
  readonly failRatio: number;
}

/** Thrown when a fixture does not validate; the message names every bad field (up to ten). */
export class FixtureError extends Error {
  override readonly name = 'FixtureError';
}

/**
 * Validates a fixture object, or reads and validates a JSON fixture file. Throws a
 * {@link FixtureError} naming the source and the bad fields, e.g.
 * `fixtures/x.json: products[3].target.user_id: invalid regular expression: ...`.
 */
export async function loadFixture(source: Fixture | string): Promise<LoadedFixture> {
  const label = typeof source === 'string' ? source : 'fixture';
  let raw: unknown = source;
  if (typeof source === 'string') {
    let text: string;
    try {
      text = await readFile(source, 'utf8');
    } catch (error) {
      throw new FixtureError(`${label}: cannot read the fixture file: ${(error as Error).message}`);
    }
    try {
      raw = JSON.parse(text);
    } catch (error) {
      throw new FixtureError(`${label}: not valid JSON: ${(error as Error).message}`);
    }
  }
  const parsed = fixtureSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .slice(0, 10)
      .map((issue) => `${formatPath(issue.path)}: ${issue.message}`);
    throw new FixtureError(`${label} is not a valid simulator fixture:\n  ${problems.join('\n  ')}`);
  }
  return {
    members: parsed.data.members.map((member) => ({
      ...member,
      ip_whitelist: member.ip_whitelist.map(normalizeIp),
    })),
    categories: parsed.data.categories,
    failRatio: parsed.data.fail_ratio,
    realistic: {
      ...parsed.data.realistic,
      completion_by_product: {
        ...Object.fromEntries(
          parsed.data.products.flatMap((product) =>
            product.completion ? [[product.code, product.completion] as const] : [],
          ),
        ),
        ...parsed.data.realistic?.completion_by_product,
      },
    },
    products: parsed.data.products.map((product) => ({
      ...product,
      targetRules: Object.entries(product.target).map(([key, pattern]) => ({
        key,
        pattern: new RegExp(pattern, 'u'),
      })),
    })),
  };
}

function formatPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(root)';
  return path
    .map((part, index) =>
      typeof part === 'number' ? `[${part}]` : `${index === 0 ? '' : '.'}${String(part)}`,
    )
    .join('');
}
