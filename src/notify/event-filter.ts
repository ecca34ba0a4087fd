import { FEED_EVENT_TYPES } from '../store/feed.js';
import { NotifyError } from './notify-error.js';

/**
 * Which events an endpoint wants: a list of patterns, each an event type (`order.updated`), a
 * family (`order.*`) or `*` for every type.
 */

/** Every event type a notification can carry (decisions.md). */
export const NOTIFY_EVENT_TYPES = FEED_EVENT_TYPES;

/** Whether `type` matches one of `patterns`. */
export function matchesEvent(patterns: readonly string[], type: string): boolean {
  return patterns.some(
    (p) => p === '*' || p === type || (p.endsWith('.*') && type.startsWith(p.slice(0, -1))),
  );
}

/** The event types `patterns` want. */
export function wantedTypes(patterns: readonly string[]): string[] {
  return NOTIFY_EVENT_TYPES.filter((type) => matchesEvent(patterns, type));
}

/**
 * Reads `--events` (comma-separated patterns); throws `INVALID_EVENT_FILTER` for a pattern that
 * matches no event type, naming the types there are.
 */
export function parseEventPatterns(text: string): string[] {
  const patterns = text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (patterns.length === 0) {
    throw new NotifyError('INVALID_EVENT_FILTER', "--events is empty: give patterns such as 'order.*'");
  }
  for (const pattern of patterns) {
    if (!NOTIFY_EVENT_TYPES.some((type) => matchesEvent([pattern], type))) {
      throw new NotifyError(
        'INVALID_EVENT_FILTER',
        `--events pattern "${pattern}" matches no event type; the types are ${NOTIFY_EVENT_TYPES.join(', ')} (or a family such as 'order.*' or 'product.*', or '*')`,
      );
    }
  }
  return patterns;
}
