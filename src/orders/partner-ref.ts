import { ulid } from 'ulid';

/** Prefix of generated partner_refs, so support can tell them from refs given by a caller. */
export const PARTNER_REF_PREFIX = 'h2h-';

/**
 * A new partner_ref: `h2h-` and a ULID (30 characters). ULIDs sort by creation time and carry
 * 80 random bits, so refs from every process are unique without coordination.
 */
export function newPartnerRef(): string {
  return `${PARTNER_REF_PREFIX}${ulid()}`;
}
