/**
 * The bounds of what a shop API request may hold (docs/api.md, "Cursor bounds"), checked at the
 * edge so both store backends answer alike.
 */

/**
 * The largest `after` of GET /v1/events: 2^53 − 1, the largest seq a JSON number carries
 * exactly (the feed's BIGINT holds more, but no reader could name it).
 */
export const MAX_FEED_SEQ = Number.MAX_SAFE_INTEGER;
