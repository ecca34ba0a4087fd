/**
 * What the public form of a `--json` output is (docs/cli.md), checked without `src/`'s converter:
 * snake_case keys, times as ISO 8601 UTC strings. Returns one line per breach, with its path.
 */
export function publicFormBreaches(value: unknown, path = '$'): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => publicFormBreaches(item, `${path}[${i}]`));
  if (typeof value === 'number' && value >= 1e12) {
    return [`${path} is ${value}, an epoch-ms time: print it as ISO 8601 UTC`];
  }
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, item]) => {
    const at = `${path}.${key}`;
    const breaches = publicFormBreaches(item, at);
    if (/[a-z0-9][A-Z]/.test(key)) breaches.unshift(`${at}: a camelCase key`);
    if (key.endsWith('_at') && item !== null && !ISO_UTC.test(String(item))) {
      breaches.unshift(`${at} is ${JSON.stringify(item)}, not an ISO 8601 UTC time`);
    }
    return breaches;
  });
}

/** `2026-11-28T18:00:00.000Z`, as `Date.prototype.toISOString` writes it. */
export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
