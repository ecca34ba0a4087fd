/**
 * The public form of everything the CLI prints with `--json` (docs/cli.md): snake_case keys and
 * times as ISO 8601 UTC strings, the form of the order, the shop API and the change feed.
 * Internal values are camelCase with times in epoch ms, and a time's key ends in `At`
 * (`createdAt`, `openedAt`); {@link toPublicJson} turns one form into the other by that naming.
 * A duration stays a number with its unit in the key (`durationMs` → `duration_ms`,
 * `oldestOpenAgeS` → `oldest_open_age_s`).
 */

/** `oldestOpenAgeS` → `oldest_open_age_s`. */
type SnakeCase<S extends string> = S extends `${infer Head}${infer Tail}`
  ? `${Head extends Lowercase<Head> ? Head : `_${Lowercase<Head>}`}${SnakeCase<Tail>}`
  : S;

/** A key that starts with a capital (`SUCCESS`, a status in `by_status`) is data and stays as it is. */
type PublicKey<K> = K extends string ? (K extends Uncapitalize<K> ? SnakeCase<K> : K) : K;

/** A number under a key ending in `At` is a time in ms: an ISO string in the public form. */
type PublicValue<K, V> = K extends `${string}At`
  ? number extends V
    ? Exclude<V, number> | string
    : PublicJson<V>
  : PublicJson<V>;

/** The type of `toPublicJson(value)` for a value of type `T`. */
export type PublicJson<T> = T extends readonly (infer E)[]
  ? PublicJson<E>[]
  : T extends object
    ? { [K in keyof T as PublicKey<K>]: PublicValue<K, T[K]> }
    : T;

function publicKey(key: string): string {
  const first = key.charAt(0);
  if (first !== first.toLowerCase()) return key;
  return key.replace(/[A-Z]/g, (capital) => `_${capital.toLowerCase()}`);
}

function publicValue(value: unknown, key: string): unknown {
  if (typeof value === 'number' && key.endsWith('At')) return new Date(value).toISOString();
  if (Array.isArray(value)) return value.map((item) => publicValue(item, ''));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [publicKey(k), publicValue(v, k)]));
  }
  return value;
}

/**
 * `value` in the public form, deeply: every camelCase key in snake_case, every number under a
 * key ending in `At` as an ISO 8601 UTC time. For the CLI's own values (a status report, a
 * token, a delivery); never for a value that is public already and holds keys someone else
 * chose (an order's `data`, an upstream payload), which would be renamed.
 */
export function toPublicJson<T>(value: T): PublicJson<T> {
  return publicValue(value, '') as PublicJson<T>;
}
