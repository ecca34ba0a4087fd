import { z } from 'zod';
import { int } from '../config/variables.js';
import { DEFAULT_NOTIFY_RETRY_S } from './retry-schedule.js';

/** Default time a delivery may take, connection, answer headers and body together. */
export const DEFAULT_NOTIFY_TIMEOUT_MS = 15_000;
/** Default deliveries in flight at once, over every endpoint. */
export const DEFAULT_NOTIFY_CONCURRENCY = 20;
/** Default time between looks at the outbox when nothing wakes the notifier. */
export const DEFAULT_NOTIFY_DISPATCH_EVERY_MS = 250;

/** The shop notifications' variables (README, "Settings"). */
export const notifyVariables = z.object({
  H2H_NOTIFY_TIMEOUT_MS: int(1)
    .default(DEFAULT_NOTIFY_TIMEOUT_MS)
    .describe(
      "Longest time one notification to the shop's endpoint may take (connection, answer and its body); a slower one counts as failed and is retried.",
    ),
  H2H_NOTIFY_RETRY_S: z
    .string()
    .regex(/^\s*\d+(\.\d+)?\s*(,\s*\d+(\.\d+)?\s*)*$/, 'must be seconds, comma-separated')
    .default(DEFAULT_NOTIFY_RETRY_S.join(','))
    .describe(
      'Seconds before each retry of a notification that was not answered 2xx, one entry per retry (up to 20 % more at random); after the last, it is given up (`h2h-sync notifications failed`). The default adds up to 3.6 days.',
    ),
  H2H_NOTIFY_CONCURRENCY: int(1)
    .default(DEFAULT_NOTIFY_CONCURRENCY)
    .describe('Notifications the worker process sends at once, over every endpoint.'),
  H2H_NOTIFY_DISPATCH_EVERY_MS: int(1)
    .default(DEFAULT_NOTIFY_DISPATCH_EVERY_MS)
    .describe(
      "How often the worker looks at the change feed and the notification outbox without being woken. It looks at once when the store reports new feed commits (every process's on this host on SQLite, every host's on PostgreSQL) and when a delivery settles; the timer covers retries coming due, an order's next event after another host delivered the one before, and places where those reports cannot come (PgBouncer in transaction mode).",
    ),
  H2H_NOTIFY_ROTATION_GRACE_H: z.coerce
    .number()
    .min(0)
    .default(24)
    .describe(
      'Hours the old secret of an endpoint keeps signing beside the new one after `h2h-sync endpoints rotate-secret` (two signatures in `webhook-signature`).',
    ),
});

/** The shop notifications' section (docs/api.md, "Notifications"), durations in ms. */
export function notifySettings(config: { settings: z.output<typeof notifyVariables> }) {
  const s = config.settings;
  return {
    timeoutMs: s.H2H_NOTIFY_TIMEOUT_MS,
    retryScheduleMs: s.H2H_NOTIFY_RETRY_S.split(',').map((part) => Math.round(Number(part.trim()) * 1000)),
    concurrency: s.H2H_NOTIFY_CONCURRENCY,
    dispatchEveryMs: s.H2H_NOTIFY_DISPATCH_EVERY_MS,
    rotationGraceMs: Math.round(s.H2H_NOTIFY_ROTATION_GRACE_H * 3_600_000),
  };
}
export type NotifySettings = ReturnType<typeof notifySettings>;
