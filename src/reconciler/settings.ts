import { z } from 'zod';
import { int } from '../config/variables.js';
import { DEFAULT_FIRST_POLL_DELAY_MS } from '../domain/poll-rules.js';

/** The reconciler's variables (README, "Settings"): the reconciler's, the submission pump's and the CLI's polls and creates (docs/reconciler.md). */
export const reconcilerVariables = z.object({
  RECONCILE_ENABLED: z
    .stringbool()
    .default(true)
    .describe(
      'Whether `h2h-sync worker` also reconciles and sends the shop API’s queued orders (needs H2H_BASE_URL and H2H_API_KEY). `false` runs a worker that only applies webhooks and delivers notifications, e.g. an extra event worker.',
    ),
  RECONCILE_EVERY_S: int(1)
    .default(60)
    .describe('Seconds between two reconciliation passes (a BullMQ job scheduler, one pass at a time).'),
  RECONCILE_FIRST_POLL_DELAY_S: int(0)
    .default(DEFAULT_FIRST_POLL_DELAY_MS / 1000)
    .describe(
      `Seconds after an order is created or changes before its first poll while no pace is learned: its webhook is overdue then. Until a reconcile pass has run on a store, its orders are first polled ${DEFAULT_FIRST_POLL_DELAY_MS / 1000} s after a change.`,
    ),
  RECONCILE_FIRST_POLL_QUANTILE: z.coerce
    .number()
    .min(0)
    .lt(1)
    .default(0.9)
    .describe(
      "Learned first poll: an order is first polled when this share of the product's orders have reached a final state (learned from the webhooks that arrive), plus the usual webhook delivery delay; `0` = always `RECONCILE_FIRST_POLL_DELAY_S`, which also applies until `RECONCILE_PACE_MIN_SAMPLES` are known. Each reconcile pass learns it from the last 20,000 webhooks and final states and writes every product's first poll for the processes that write orders (docs/reconciler.md).",
    ),
  RECONCILE_FIRST_POLL_MIN_S: int(0)
    .default(5)
    .describe('Earliest first poll after a creation or change, in seconds, whatever the learned pace says.'),
  RECONCILE_FIRST_POLL_MAX_S: int(1)
    .default(900)
    .describe('Latest first poll after a creation or change, in seconds, whatever the learned pace says.'),
  RECONCILE_PACE_MIN_SAMPLES: int(1)
    .default(50)
    .describe(
      "Final states of a product (among the learned events) needed before its own pace is used (before that, every product's together, then `RECONCILE_FIRST_POLL_DELAY_S`).",
    ),
  RECONCILE_BACKOFF_S: z
    .string()
    .regex(/^\s*[1-9]\d*\s*(,\s*[1-9]\d*\s*)*$/, 'must be positive whole seconds, comma-separated')
    .default('60,120,300,600,1800,3600')
    .describe(
      'Seconds between polls of an order that does not change, one entry per poll; the last repeats (the cap).',
    ),
  RECONCILE_REFUND_WATCH_S: int(0)
    .optional()
    .describe(
      'Deprecated and ignored: the audit from idle budget (`RECONCILE_AUDIT_WINDOW_D`) replaced the refund watch and finds refunds whose webhooks were all lost. Remove it.',
    ),
  RECONCILE_AUDIT_WINDOW_D: int(0)
    .default(7)
    .describe(
      'Days after it became final that a SUCCESS order is still re-read by the audit, which uses only poll capacity that creation and due polls leave idle, to find refunds (and late serials) whose webhooks were all lost; `0` = no audit.',
    ),
  RECONCILE_AUDIT_EVERY_S: int(1)
    .default(86_400)
    .describe(
      'Seconds before the audit reads the same SUCCESS order again; it takes the least recently checked first.',
    ),
  RECONCILE_STUCK_AFTER_H: int(1)
    .default(48)
    .describe('Hours without a final state after which an order is marked stuck (it is still polled).'),
  RECONCILE_PASS_SIZE: int(1)
    .default(500)
    .describe('Most orders one pass polls; the poll share of the rate budget usually ends a pass first.'),
  RECONCILE_LEASE_S: int(1)
    .default(45)
    .describe(
      'Seconds a claim on an order (a poll, or a create by the submission pump, the reconciler or the CLI) keeps it out of reach of every other process; renewed every third of it while a create waits for a budget slot or an answer, so a dead process’s orders are free again within it (docs/reconciler.md, "Claims"). At least twice H2H_CONNECT_TIMEOUT_MS + H2H_HEADERS_TIMEOUT_MS: nothing is sent with less than half of it left, and every attempt is answered or given up within those two.',
    ),
});

/** The reconciler's section (docs/reconciler.md), every duration in ms; `backoffMs` is one entry per poll, the last repeating. */
export function reconcilerSettings(config: { settings: z.output<typeof reconcilerVariables> }) {
  const s = config.settings;
  return {
    everyMs: s.RECONCILE_EVERY_S * 1000,
    firstPollDelayMs: s.RECONCILE_FIRST_POLL_DELAY_S * 1000,
    firstPollQuantile: s.RECONCILE_FIRST_POLL_QUANTILE,
    firstPollMinMs: s.RECONCILE_FIRST_POLL_MIN_S * 1000,
    firstPollMaxMs: s.RECONCILE_FIRST_POLL_MAX_S * 1000,
    paceMinSamples: s.RECONCILE_PACE_MIN_SAMPLES,
    backoffMs: s.RECONCILE_BACKOFF_S.split(',').map((part) => Number(part.trim()) * 1000),
    auditWindowMs: s.RECONCILE_AUDIT_WINDOW_D * 86_400_000,
    auditEveryMs: s.RECONCILE_AUDIT_EVERY_S * 1000,
    stuckAfterMs: s.RECONCILE_STUCK_AFTER_H * 3_600_000,
    passSize: s.RECONCILE_PASS_SIZE,
    leaseMs: s.RECONCILE_LEASE_S * 1000,
  };
}
export type ReconcilerSettings = ReturnType<typeof reconcilerSettings>;
