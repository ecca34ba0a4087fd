import { ulid } from 'ulid';
import { PARTNER_REF_MAX_LENGTH } from '../upstream/model.js';

/** Prefix of generated partner_refs, so support can tell them from refs given by a caller. */
export const PARTNER_REF_PREFIX = 'h2h-';

/**
 * A new partner_ref: `h2h-` and a ULID (30 characters). ULIDs sort by creation time and carry
 * 80 random bits, so refs from every process are unique without coordination.
 */
export function newPartnerRef(): string {
  return `${PARTNER_REF_PREFIX}${ulid()}`;
}

/** Checks a caller's partner_ref against spec §8; returns the problem, or undefined. */
export function partnerRefProblem(ref: string): string | undefined {
  if (ref.trim() === '') return 'partner_ref must not be empty';
  if ([...ref].length > PARTNER_REF_MAX_LENGTH) {
    return `partner_ref must be at most ${PARTNER_REF_MAX_LENGTH} characters (got ${[...ref].length})`;
  }
  return undefined;
}
