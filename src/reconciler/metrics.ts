import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { LocalOrder } from '../store/local-order.js';
import type { OrderQueries } from '../store/order-queries.js';
import { CIRCUIT_CAUSES, type CircuitCause, type UpstreamCircuit } from '../store/upstream-circuit.js';
import { parseUpstreamTime } from '../upstream/upstream-time.js';

/**
 * What one poll came to (the `outcome` label of `h2h_reconcile_polls_total`):
 * - `changed` / `unchanged`: the answer was applied and moved the order, or not;
 * - `resubmitted`: 404 for an order whose submission was pending or unknown, so the create was
 *   repeated with the same partner_ref;
 * - `not_found`: 404 for an order the upstream had confirmed (an anomaly), or a stale webhook's
 *   order that nobody knows;
 * - `unauthorized` (401), `rate_limited` (429), `upstream_error` (5xx or another refusal),
 *   `unreachable` (no answer), `invalid_answer` (an answer the store cannot apply).
 */
export type PollOutcome =
  | 'changed'
  | 'unchanged'
  | 'resubmitted'
  | 'not_found'
  | 'unauthorized'
  | 'rate_limited'
  | 'upstream_error'
  | 'unreachable'
  | 'invalid_answer';

export const POLL_OUTCOMES: readonly PollOutcome[] = [
  'changed',
  'unchanged',
  'resubmitted',
  'not_found',
  'unauthorized',
  'rate_limited',
  'upstream_error',
  'unreachable',
  'invalid_answer',
];

/** Anomalies the reconciler counts (`h2h_reconcile_anomalies_total{kind}`). */
export type AnomalyKind = 'confirmed_order_not_found';

/** Where the news that made an order final came from. */
export type FinalSource = 'poll' | 'webhook' | 'create';

/** The reconciler's Prometheus metrics. */
export interface ReconcilerMetrics {
  readonly registry: Registry;
  countPoll(outcome: PollOutcome): void;
  /** A poll changed an order: its webhook was lost or late. */
  countChangedByPoll(): void;
  countAnomaly(kind: AnomalyKind): void;
  /** Counts a finished pass by why it ended. */
  countPass(stoppedBy: string): void;
  /**
   * Observes the time from an order's creation (the upstream's `created_at`, else the local
   * creation) to its first final state. Call once, when `source` made the order final; the
   * event worker can call it for webhooks.
   */
  observeTimeToFinal(
    order: Pick<LocalOrder, 'createdAt' | 'localCreatedAt' | 'finalAt'>,
    source: FinalSource,
  ): void;
  /** Sets the stuck-orders gauge (it is also read from the store at each scrape when one is given). */
  setStuck(count: number): void;
  /** The circuit opened, or its cause changed. */
  countCircuitOpened(cause: CircuitCause): void;
  /** A probe of the upstream (`GET /profile`) while the circuit was open or blocked orders waited. */
  countProbe(outcome: 'ok' | 'failed'): void;
  /** An audit read of a settled SUCCESS order, by outcome (the labels of the polls). */
  countAuditRead(outcome: PollOutcome): void;
  /** The audit found a refund whose webhooks were all lost. */
  countAuditRefund(): void;
  /**
   * How late a pass polled an order: from its `next_poll_at` to the poll, in seconds. A tail
   * here means orders wait for poll slots (docs/reconciler.md, "The poll floor").
   */
  observePollLateness(seconds: number): void;
}

export interface ReconcilerMetricsOptions {
  /** Registry to register in, for example the worker process's. Default: a new one. */
  registry?: Registry;
  /** When given, `h2h_reconcile_stuck_orders` is read from the store at each scrape. */
  queries?: OrderQueries;
  /** When given, `h2h_reconcile_circuit_open` is read from the store at each scrape. */
  circuit?: UpstreamCircuit;
  /**
   * The audit window (`reconcilerSettings(config).auditWindowMs`): with `queries`,
   * `h2h_reconcile_audit_coverage` is registered and read from the store at each scrape.
   * Default (or 0, the audit off): no such gauge.
   */
  auditWindowMs?: number;
}

/** Buckets of `h2h_reconcile_poll_lateness_seconds`: a pass interval is 60 s by default. */
export const POLL_LATENESS_BUCKETS = [1, 5, 15, 30, 60, 120, 300, 600, 1800];

/** Buckets of the time-to-final histogram, in seconds: 5 s to 48 h. */
export const TIME_TO_FINAL_BUCKETS = [
  5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21_600, 86_400, 172_800,
];

/**
 * Creates `h2h_reconcile_polls_total{outcome}`, `h2h_reconcile_orders_changed_total`,
 * `h2h_reconcile_anomalies_total{kind}`, `h2h_reconcile_passes_total{stopped_by}`,
 * `h2h_reconcile_stuck_orders`, `h2h_reconcile_blocked_orders`, `h2h_reconcile_circuit_open{cause}`,
 * `h2h_reconcile_circuit_opened_total{cause}`, `h2h_reconcile_probes_total{outcome}`,
 * `h2h_reconcile_audit_reads_total{outcome}`, `h2h_reconcile_audit_refunds_found_total`,
 * `h2h_reconcile_audit_coverage` and `h2h_order_time_to_final_seconds{source}`. No default
 * process metrics: the process that exposes the registry adds those once.
 */
export function createReconcilerMetrics(options: ReconcilerMetricsOptions = {}): ReconcilerMetrics {
  const registry = options.registry ?? new Registry();
  const registers = [registry];

  const polls = new Counter({
    name: 'h2h_reconcile_polls_total',
    help: 'Status polls of the reconciler by outcome.',
    labelNames: ['outcome'] as const,
    registers,
  });
  for (const outcome of POLL_OUTCOMES) polls.inc({ outcome }, 0);

  const changed = new Counter({
    name: 'h2h_reconcile_orders_changed_total',
    help: 'Polls that changed an order: each is a webhook that was lost or late.',
    registers,
  });

  const anomalies = new Counter({
    name: 'h2h_reconcile_anomalies_total',
    help: 'Anomalies seen while reconciling, such as a 404 for an order the upstream had confirmed.',
    labelNames: ['kind'] as const,
    registers,
  });
  anomalies.inc({ kind: 'confirmed_order_not_found' }, 0);

  const passes = new Counter({
    name: 'h2h_reconcile_passes_total',
    help: 'Reconciliation passes by why they ended (done, budget, pass_size, locked, unauthorized …).',
    labelNames: ['stopped_by'] as const,
    registers,
  });

  const { queries } = options;
  let stuckCount = 0;
  new Gauge({
    name: 'h2h_reconcile_stuck_orders',
    help: 'Open orders marked stuck: no final state after RECONCILE_STUCK_AFTER_H.',
    registers,
    async collect() {
      if (queries) {
        try {
          stuckCount = (await queries.countByStatus()).stuck;
        } catch {
          // the database is closing or busy: keep the last figure
        }
      }
      this.set(stuckCount);
    },
  });

  let blockedCount = 0;
  new Gauge({
    name: 'h2h_reconcile_blocked_orders',
    help: 'Orders the upstream refused for our configuration (401/403): submitted again with their partner_ref once a probe shows H2H_API_KEY and the whitelist work.',
    registers,
    async collect() {
      if (queries) {
        try {
          blockedCount = (await queries.countByStatus()).bySubmissionState.blocked;
        } catch {
          // the database is closing or busy: keep the last figure
        }
      }
      this.set(blockedCount);
    },
  });

  const { circuit } = options;
  new Gauge({
    name: 'h2h_reconcile_circuit_open',
    help: 'Whether the reconciler has stopped calling the upstream, by cause: 1 for the open cause (unauthorized: fix H2H_API_KEY or the whitelist; base_url: fix H2H_BASE_URL; upstream_failing: the upstream fails for every order).',
    labelNames: ['cause'] as const,
    registers,
    async collect() {
      let open: CircuitCause | undefined;
      try {
        open = (await circuit?.state())?.cause;
      } catch {
        return; // the database is closing or busy: keep the last figures
      }
      for (const cause of CIRCUIT_CAUSES) this.set({ cause }, cause === open ? 1 : 0);
    },
  });
  const circuitOpened = new Counter({
    name: 'h2h_reconcile_circuit_opened_total',
    help: 'Times the reconciler circuit opened (or changed cause), by cause.',
    labelNames: ['cause'] as const,
    registers,
  });
  for (const cause of CIRCUIT_CAUSES) circuitOpened.inc({ cause }, 0);
  const probes = new Counter({
    name: 'h2h_reconcile_probes_total',
    help: 'Probes of the upstream (GET /profile) that decide whether the circuit closes, by outcome.',
    labelNames: ['outcome'] as const,
    registers,
  });
  for (const outcome of ['ok', 'failed']) probes.inc({ outcome }, 0);

  const auditReads = new Counter({
    name: 'h2h_reconcile_audit_reads_total',
    help: 'Audit reads of settled SUCCESS orders on idle budget, by outcome.',
    labelNames: ['outcome'] as const,
    registers,
  });
  for (const outcome of POLL_OUTCOMES) auditReads.inc({ outcome }, 0);
  const auditRefunds = new Counter({
    name: 'h2h_reconcile_audit_refunds_found_total',
    help: 'Refunds the audit found: SUCCESS orders refunded upstream whose webhooks were all lost.',
    registers,
  });
  const { auditWindowMs } = options;
  if (queries && auditWindowMs) {
    new Gauge({
      name: 'h2h_reconcile_audit_coverage',
      help: 'Share of the SUCCESS orders of the audit window checked with the upstream in the last day (1 when there are none).',
      registers,
      async collect() {
        try {
          const { successOrders, checkedLastDay } = await queries.auditCoverage(auditWindowMs);
          this.set(successOrders === 0 ? 1 : checkedLastDay / successOrders);
        } catch {
          // the database is closing or busy: keep the last figure
        }
      },
    });
  }

  const timeToFinal = new Histogram({
    name: 'h2h_order_time_to_final_seconds',
    help: 'Time from an order’s creation to its first final state, by what reported it.',
    labelNames: ['source'] as const,
    buckets: TIME_TO_FINAL_BUCKETS,
    registers,
  });

  const pollLateness = new Histogram({
    name: 'h2h_reconcile_poll_lateness_seconds',
    help: 'Time from an order’s due time (next_poll_at) to the pass that polled it.',
    buckets: POLL_LATENESS_BUCKETS,
    registers,
  });

  return {
    registry,
    countPoll: (outcome) => polls.inc({ outcome }),
    countChangedByPoll: () => changed.inc(),
    countAnomaly: (kind) => anomalies.inc({ kind }),
    countPass: (stoppedBy) => passes.inc({ stopped_by: stoppedBy }),
    observeTimeToFinal(order, source) {
      if (order.finalAt === null) return;
      const upstreamCreated = parseUpstreamTime(order.createdAt);
      const created = Number.isFinite(upstreamCreated) ? upstreamCreated : order.localCreatedAt;
      timeToFinal.observe({ source }, Math.max(0, (order.finalAt - created) / 1000));
    },
    setStuck(count) {
      stuckCount = count;
    },
    countCircuitOpened: (cause) => circuitOpened.inc({ cause }),
    countProbe: (outcome) => probes.inc({ outcome }),
    countAuditRead: (outcome) => auditReads.inc({ outcome }),
    countAuditRefund: () => auditRefunds.inc(),
    observePollLateness: (seconds) => pollLateness.observe(Math.max(0, seconds)),
  };
}
