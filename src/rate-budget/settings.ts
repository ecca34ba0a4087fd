import { z } from 'zod';
import { int } from '../config/variables.js';
import { DEFAULT_RATE_LIMIT_PER_MINUTE } from '../upstream/model.js';
// rate-budget.ts loads no package (ioredis is a type import there), so its defaults are read from it.
import { DEFAULT_RATE_WINDOW_MS, defaultPollFloor, defaultReservedForCreate } from './rate-budget.js';

/**
 * The shared rate budget's variables (README, "Settings"). The defaults of the two shares follow
 * from `H2H_RATE_LIMIT` ({@link budgetSettings}), and their bounds tie them together: the
 * config's cross-field rules (src/config/config.ts) check them.
 */
export const budgetVariables = z.object({
  H2H_RATE_LIMIT: int(1)
    .default(DEFAULT_RATE_LIMIT_PER_MINUTE)
    .describe('Upstream calls allowed per rate window, shared by every process.'),
  H2H_RATE_WINDOW_MS: int(1000)
    .default(DEFAULT_RATE_WINDOW_MS)
    .describe('Length of the rolling rate window.'),
  H2H_RATE_RESERVE_CREATE: int(0)
    .optional()
    .describe(
      'Calls per window that status polling may never use, kept for order creation; below `H2H_RATE_LIMIT`. Default: a third of `H2H_RATE_LIMIT`, rounded.',
    ),
  H2H_RATE_POLL_FLOOR: int(0)
    .optional()
    .describe(
      'Calls per window that creation leaves to status polls while polls are waiting, so a burst of orders at the whole limit cannot stop polling (docs/reconciler.md, "The poll floor"); 0 turns it off; at most `H2H_RATE_LIMIT - H2H_RATE_RESERVE_CREATE`. Default: 15 % of `H2H_RATE_LIMIT`, rounded (9 of 60).',
    ),
});

/**
 * The shared rate budget's section: `RateBudget`'s options but the Redis and the API key. `limit`
 * is an upstream account's own (its `rate_limit`, docs/upstreams.md); default `H2H_RATE_LIMIT`.
 * The shares are of `H2H_RATE_LIMIT`; an account with another limit keeps their proportions
 * (rounded; a reserve below its limit, a floor within its poll share).
 */
export function budgetSettings(config: { settings: z.output<typeof budgetVariables> }, limit?: number) {
  const s = config.settings;
  const reservedForCreate = s.H2H_RATE_RESERVE_CREATE ?? defaultReservedForCreate(s.H2H_RATE_LIMIT);
  const pollFloor = s.H2H_RATE_POLL_FLOOR ?? defaultPollFloor(s.H2H_RATE_LIMIT);
  if (limit === undefined || limit === s.H2H_RATE_LIMIT) {
    return { limit: s.H2H_RATE_LIMIT, windowMs: s.H2H_RATE_WINDOW_MS, reservedForCreate, pollFloor };
  }
  const scaled = (share: number) => Math.round((share * limit) / s.H2H_RATE_LIMIT);
  const reserve = Math.min(limit - 1, scaled(reservedForCreate));
  return {
    limit,
    windowMs: s.H2H_RATE_WINDOW_MS,
    reservedForCreate: reserve,
    pollFloor: Math.min(limit - reserve, scaled(pollFloor)),
  };
}
export type BudgetSettings = ReturnType<typeof budgetSettings>;
