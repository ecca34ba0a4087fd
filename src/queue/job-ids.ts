import { createHash } from 'node:crypto';
import { isDefaultUpstream } from '../upstream/model.js';

/**
 * BullMQ refuses custom job ids that contain `:` or read as an integer, and every id becomes
 * part of a Redis key. A value made only of these characters (and not too long) is used as it
 * is, behind a prefix that keeps it from being an integer; anything else is hashed.
 */
const SAFE_ID_PART = /^[A-Za-z0-9_.~-]{1,128}$/;

/** Lowercase hex SHA-256 of a string (as UTF-8) or of bytes. */
export function sha256Hex(value: string | Buffer): string {
  return createHash('sha256').update(value).digest('hex');
}

/**
 * The job-id prefix of one upstream's jobs (docs/upstreams.md): `prefix` for the default
 * upstream's (the ids of a single upstream never change), `prefix@<name>@` for another's. An
 * upstream name has no `@`, nor has an id-safe value, so two upstreams' ids never meet.
 */
export function scopedPrefix(prefix: string, upstream: string | undefined): string {
  return isDefaultUpstream(upstream) ? prefix : `${prefix}@${upstream}@`;
}

/**
 * A BullMQ-valid job id for `value`: `<prefix>-<value>` when the value is short and made of
 * `[A-Za-z0-9_.~-]`, else `<prefix>h-<sha256 hex of value>` (the `h` keeps the two forms apart).
 */
export function jobIdFor(prefix: string, value: string): string {
  return SAFE_ID_PART.test(value) ? `${prefix}-${value}` : `${prefix}h-${sha256Hex(value)}`;
}
