import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { oneReadPerScrape } from '../shared/scrape-read.js';
import type { LocalOrder } from '../store/local-order.js';
import type { OrderQueries, StoredCounts } from '../store/order-queries.js';
import { CIRCUIT_CAUSES, type CircuitCause, type UpstreamCircuit } from '../store/upstream-circuit.js';
import { DEFAULT_UPSTREAM } from '../upstream/model.js';
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

/** One upstream's reconciler's Prometheus metrics: every series it counts in has its `upstream` label. */
export interface ReconcilerMetrics {
  readonly registry: Registry;
  /** The `upstream` label of its series. */
  readonly upstream: string;
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
  /**
   * Registry to register in, for example the worker process's. Default: a new one. The
   * reconcilers of several upstreams give the same registry: each counts in the same series
   * under its own `upstream` label.
   */
  registry?: Registry;
  /** The upstream these metrics are of: the `upstream` label of every series. Default: `default`. */
  upstream?: string;
  /** When given, `h2h_reconcile_stuck_orders`, `…_blocked_orders` and `…_overdue_orders` are read from the store at each scrape (the upstream's orders). */
  queries?: OrderQueries;
  /** When given, `h2h_reconcile_circuit_open` is read from the store at each scrape (the upstream's circuit). */
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

/** The store an upstream's gauges read at scrape time. */
interface StoreReads {
  queries: OrderQueries;
  /** The upstream's counts (`order_counts` alone), read once a scrape for the stuck and the blocked gauges. */
  counts: () => Promise<StoredCounts>;
}

/** What the gauges read at scrape time, per upstream. */
interface UpstreamSource {
  reads: StoreReads | undefined;
  circuit: UpstreamCircuit | undefined;
  auditWindowMs: number | undefined;
  stuck: number;
  blocked: number;
  overdue: number;
}

/** The series of one registry, and the upstreams counting in them. */
type MetricSet = ReturnType<typeof createMetricSet>;

/** The metric set of each registry that has one: the reconcilers of several upstreams share it. */
const setsByRegistry = new WeakMap<Registry, MetricSet>();

/**
 * Creates (or, for a registry that has them, joins) `h2h_reconcile_polls_total{outcome}`,
 * `h2h_reconcile_orders_changed_total`, `h2h_reconcile_anomalies_total{kind}`,
 * `h2h_reconcile_passes_total{stopped_by}`, `h2h_reconcile_stuck_orders`,
 * `h2h_reconcile_blocked_orders`, `h2h_reconcile_overdue_orders`, `h2h_reconcile_circuit_open{cause}`,
 * `h2h_reconcile_circuit_opened_total{cause}`, `h2h_reconcile_probes_total{outcome}`,
 * `h2h_reconcile_audit_reads_total{outcome}`, `h2h_reconcile_audit_refunds_found_total`,
 * `h2h_reconcile_audit_coverage`, `h2h_reconcile_poll_lateness_seconds` and
 * `h2h_order_time_to_final_seconds{source}`, every one also labelled `upstream`
 * (docs/reconciler.md, "Metrics"). Throws when the registry already counts for that upstream. No
 * default process metrics: the process that exposes the registry adds those once.
 */
export function createReconcilerMetrics(options: ReconcilerMetricsOptions = {}): ReconcilerMetrics {
  const registry = options.registry ?? new Registry();
  const upstream = options.upstream ?? DEFAULT_UPSTREAM;
  let set = setsByRegistry.get(registry);
  if (!set) {
    set = createMetricSet(registry);
    setsByRegistry.set(registry, set);
  }
  if (set.sources.has(upstream)) {
    throw new Error(`the registry already has the reconciler metrics of upstream "${upstream}"`);
  }
  const { queries } = options;
  const source: UpstreamSource = {
    reads: queries && { queries, counts: oneReadPerScrape(() => queries.countsOnly(upstream)) },
    circuit: options.circuit,
    auditWindowMs: options.auditWindowMs,
    stuck: 0,
    blocked: 0,
    overdue: 0,
  };
  set.sources.set(upstream, source);
  if (options.queries && options.auditWindowMs) set.registerAuditCoverage();
  const { series } = set;
  for (const outcome of POLL_OUTCOMES) {
    series.polls.inc({ upstream, outcome }, 0);
    series.auditReads.inc({ upstream, outcome }, 0);
  }
  series.changed.inc({ upstream }, 0);
  series.anomalies.inc({ upstream, kind: 'confirmed_order_not_found' }, 0);
  for (const cause of CIRCUIT_CAUSES) series.circuitOpened.inc({ upstream, cause }, 0);
  for (const outcome of ['ok', 'failed']) series.probes.inc({ upstream, outcome }, 0);
  series.auditRefunds.inc({ upstream }, 0);

  return {
    registry,
    upstream,
    countPoll: (outcome) => series.polls.inc({ upstream, outcome }),
    countChangedByPoll: () => series.changed.inc({ upstream }),
    countAnomaly: (kind) => series.anomalies.inc({ upstream, kind }),
    countPass: (stoppedBy) => series.passes.inc({ upstream, stopped_by: stoppedBy }),
    observeTimeToFinal(order, origin) {
      if (order.finalAt === null) return;
      const upstreamCreated = parseUpstreamTime(order.createdAt);
      const created = Number.isFinite(upstreamCreated) ? upstreamCreated : order.localCreatedAt;
      series.timeToFinal.observe({ upstream, source: origin }, Math.max(0, (order.finalAt - created) / 1000));
    },
    setStuck(count) {
      source.stuck = count;
    },
    countCircuitOpened: (cause) => series.circuitOpened.inc({ upstream, cause }),
    countProbe: (outcome) => series.probes.inc({ upstream, outcome }),
    countAuditRead: (outcome) => series.auditReads.inc({ upstream, outcome }),
    countAuditRefund: () => series.auditRefunds.inc({ upstream }),
    observePollLateness: (seconds) => series.pollLateness.observe({ upstream }, Math.max(0, seconds)),
  };
}

/** The series of {@link createReconcilerMetrics} in `registry`, with the gauges reading every upstream's store at scrape time. */
function createMetricSet(registry: Registry) {
  const registers = [registry];
  const sources = new Map<string, UpstreamSource>();

  const polls = new Counter({
    name: 'h2h_reconcile_polls_total',
    help: 'Status polls of the reconciler by outcome.',
    labelNames: ['upstream', 'outcome'] as const,
    registers,
  });
  const changed = new Counter({
    name: 'h2h_reconcile_orders_changed_total',
    help: 'Polls that changed an order: each is a webhook that was lost or late.',
    labelNames: ['upstream'] as const,
    registers,
  });
  const anomalies = new Counter({
    name: 'h2h_reconcile_anomalies_total',
    help: 'Anomalies seen while reconciling, such as a 404 for an order the upstream had confirmed.',
    labelNames: ['upstream', 'kind'] as const,
    registers,
  });
  const passes = new Counter({
    name: 'h2h_reconcile_passes_total',
    help: 'Reconciliation passes by why they ended (done, budget, pass_size, locked, unauthorized …).',
    labelNames: ['upstream', 'stopped_by'] as const,
    registers,
  });

  /**
   * A count of each upstream's orders read from the store at each scrape, into `source[key]`
   * (also set by the pass); a store that does not answer (closing, busy) keeps the last figure.
   */
  const storeCount = (
    name: string,
    help: string,
    key: 'stuck' | 'blocked' | 'overdue',
    read: (reads: StoreReads, upstream: string) => Promise<number>,
  ) =>
    new Gauge({
      name,
      help,
      labelNames: ['upstream'] as const,
      registers,
      async collect() {
        for (const [upstream, source] of sources) {
          if (source.reads) {
            try {
              source[key] = await read(source.reads, upstream);
            } catch {
              // the database is closing or busy: keep the last figure
            }
          }
          this.set({ upstream }, source[key]);
        }
      },
    });
  storeCount(
    'h2h_reconcile_stuck_orders',
    'Open orders marked stuck: no final state after RECONCILE_STUCK_AFTER_H.',
    'stuck',
    async ({ counts }) => (await counts()).stuck,
  );
  storeCount(
    'h2h_reconcile_overdue_orders',
    'Open orders past their product’s learned outlier time (longer than all but one in a thousand of its orders take), read from the store at each scrape.',
    'overdue',
    ({ queries }, upstream) => queries.countOverdue(upstream),
  );
  storeCount(
    'h2h_reconcile_blocked_orders',
    'Orders the upstream refused for our configuration (401/403): submitted again with their partner_ref once a probe shows its API key and the whitelist work.',
    'blocked',
    async ({ counts }) => (await counts()).bySubmissionState.blocked,
  );
  new Gauge({
    name: 'h2h_reconcile_circuit_open',
    help: 'Whether the reconciler has stopped calling the upstream, by cause: 1 for the open cause (unauthorized: fix its API key or the whitelist; base_url: fix its base URL; upstream_failing: the upstream fails for every order).',
    labelNames: ['upstream', 'cause'] as const,
    registers,
    async collect() {
      for (const [upstream, source] of sources) {
        let open: CircuitCause | undefined;
        try {
          open = (await source.circuit?.state())?.cause;
        } catch {
          continue; // the database is closing or busy: keep the last figures
        }
        for (const cause of CIRCUIT_CAUSES) this.set({ upstream, cause }, cause === open ? 1 : 0);
      }
    },
  });
  const circuitOpened = new Counter({
    name: 'h2h_reconcile_circuit_opened_total',
    help: 'Times the reconciler circuit opened (or changed cause), by cause.',
    labelNames: ['upstream', 'cause'] as const,
    registers,
  });
  const probes = new Counter({
    name: 'h2h_reconcile_probes_total',
    help: 'Probes of the upstream (GET /profile) that decide whether the circuit closes, by outcome.',
    labelNames: ['upstream', 'outcome'] as const,
    registers,
  });
  const auditReads = new Counter({
    name: 'h2h_reconcile_audit_reads_total',
    help: 'Audit reads of settled SUCCESS orders on idle budget, by outcome.',
    labelNames: ['upstream', 'outcome'] as const,
    registers,
  });
  const auditRefunds = new Counter({
    name: 'h2h_reconcile_audit_refunds_found_total',
    help: 'Refunds the audit found: SUCCESS orders refunded upstream whose webhooks were all lost.',
    labelNames: ['upstream'] as const,
    registers,
  });
  let auditCoverageRegistered = false;
  const registerAuditCoverage = () => {
    if (auditCoverageRegistered) return;
    auditCoverageRegistered = true;
    new Gauge({
      name: 'h2h_reconcile_audit_coverage',
      help: 'Share of the SUCCESS orders of the audit window checked with the upstream in the last day (1 when there are none).',
      labelNames: ['upstream'] as const,
      registers,
      async collect() {
        for (const [upstream, { reads, auditWindowMs }] of sources) {
          if (!reads || !auditWindowMs) continue;
          try {
            const { successOrders, checkedLastDay } = await reads.queries.auditCoverage(
              auditWindowMs,
              undefined,
              upstream,
            );
            this.set({ upstream }, successOrders === 0 ? 1 : checkedLastDay / successOrders);
          } catch {
            // the database is closing or busy: keep the last figure
          }
        }
      },
    });
  };

  const timeToFinal = new Histogram({
    name: 'h2h_order_time_to_final_seconds',
    help: 'Time from an order’s creation to its first final state, by what reported it.',
    labelNames: ['upstream', 'source'] as const,
    buckets: TIME_TO_FINAL_BUCKETS,
    registers,
  });
  const pollLateness = new Histogram({
    name: 'h2h_reconcile_poll_lateness_seconds',
    help: 'Time from an order’s due time (next_poll_at) to the pass that polled it.',
    labelNames: ['upstream'] as const,
    buckets: POLL_LATENESS_BUCKETS,
    registers,
  });

  return {
    sources,
    registerAuditCoverage,
    series: {
      polls,
      changed,
      anomalies,
      passes,
      circuitOpened,
      probes,
      auditReads,
      auditRefunds,
      timeToFinal,
      pollLateness,
    },
  };
}
