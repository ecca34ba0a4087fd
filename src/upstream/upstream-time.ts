/**
 * ISO 8601 times read the same on every server, whatever its time zone.
 *
 * `Date.parse` reads a date-time without `Z` or an offset as the server's local time, so the same
 * upstream `created_at` would mean another instant on a server in Jakarta than on one in UTC.
 * The spec's times are UTC (§2: `created_at` and `success_at` are "ISO 8601 UTC"), so an
 * offset-less upstream time is read as UTC here; our own API refuses one instead (it cannot know
 * the shop's zone), which is why {@link readIsoTime} says whether an offset was given.
 */

/** An ISO 8601 time as written: its instant, and whether it carried a time of day and an offset. */
export interface IsoTime {
  /** Ms since the epoch; a time without an offset is read as UTC, a date alone as its midnight UTC. */
  ms: number;
  /** Whether a time of day was given (`2026-11-25` has none). */
  hasTime: boolean;
  /** Whether `Z` or an offset (`+07:00`, `+0700`, `+07`) was given. */
  hasOffset: boolean;
}

// Extended format: a date, optionally a time (`T` or a space, minutes, optional seconds and
// fraction) and then optionally `Z` or an offset.
const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?([Zz]|[+-]\d{2}(?::?\d{2})?)?)?$/;

function offsetMinutes(offset: string): number | undefined {
  if (offset === 'Z' || offset === 'z') return 0;
  const digits = offset.slice(1).replace(':', '');
  const hours = Number(digits.slice(0, 2));
  const minutes = digits.length > 2 ? Number(digits.slice(2)) : 0;
  if (hours > 23 || minutes > 59) return undefined;
  return (offset[0] === '-' ? -1 : 1) * (hours * 60 + minutes);
}

/**
 * Reads an ISO 8601 date or date-time (`2026-11-25`, `2026-11-25T10:00:00`,
 * `2026-11-25T10:00:00.123Z`, `2026-11-25 17:00:00+07:00` …) without the server's time zone:
 * a time without `Z` or an offset is read as UTC. Undefined for anything else, out-of-range
 * fields (month 13, 31 November, 24:00) included. Pure.
 */
export function readIsoTime(text: string): IsoTime | undefined {
  const match = ISO_TIME.exec(text.trim());
  if (!match) return undefined;
  const [, y, mo, d, h, mi, s, fraction, offset] = match;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h ?? 0);
  const minute = Number(mi ?? 0);
  const second = Number(s ?? 0);
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return undefined;
  const shift = offset === undefined ? 0 : offsetMinutes(offset);
  if (shift === undefined) return undefined;
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  if (date.getUTCDate() !== day) return undefined; // 31 November rolled over into December
  date.setUTCHours(hour, minute, second, fraction ? Number(fraction.slice(0, 3).padEnd(3, '0')) : 0);
  return { ms: date.getTime() - shift * 60_000, hasTime: h !== undefined, hasOffset: offset !== undefined };
}

/**
 * An upstream time (an order's `created_at` or `success_at`, a webhook's `created_at`) in ms since
 * the epoch. An ISO 8601 time without `Z` or `±hh:mm` is UTC, as spec §2 says, never the server's
 * local time. NaN for anything that is not an ISO 8601 date or date-time (a missing field, junk),
 * like `Date.parse`, so a caller checks `Number.isFinite`.
 */
export function parseUpstreamTime(value: unknown): number {
  if (typeof value !== 'string') return Number.NaN;
  return readIsoTime(value)?.ms ?? Number.NaN;
}
