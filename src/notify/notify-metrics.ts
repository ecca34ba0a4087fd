import { Counter, type Gauge, Histogram, Registry } from 'prom-client';
import { scrapedGauges } from '../shared/scrape-read.js';
import { DELIVERY_OUTCOMES, type DeliveryOutcome } from '../store/notify-deliveries.js';
import type { NotifyEndpoint, NotifyEndpoints } from '../store/notify-endpoints.js';
import type { NotifyOutbox, OutboxBacklog } from '../store/notify-outbox.js';
import { wantedTypes } from './event-filter.js';

/** The reason the notifier records when an endpoint answers 410 Gone and is disabled. */
export const GONE_REASON = 'the endpoint answered 410 Gone';

/** The notification worker's Prometheus metrics, served on the admin port's `/metrics`. */
export interface NotifyMetrics {
  readonly registry: Registry;
  /** One delivery attempt (or skip) and what it came to. */
  countDelivery(outcome: DeliveryOutcome, durationMs: number | null): void;
  /** Notifications added to the outbox from the feed. */
  countDispatched(n: number): void;
}

/** What the per-endpoint gauges read from the store at each scrape. */
export interface NotifyMetricsSource {
  endpoints: Pick<NotifyEndpoints, 'list'>;
  outbox: Pick<NotifyOutbox, 'backlog'>;
  /** The clock, in ms since the epoch. Default: `Date.now`. */
  now?: () => number;
}

/**
 * `h2h_notify_deliveries_total{outcome}`, `h2h_notify_delivery_duration_seconds` and
 * `h2h_notify_dispatched_total`, counted by the notifier; with `source`, also each endpoint's
 * backlog read from the store at each scrape (what `h2h-sync status` shows), labelled by the
 * endpoint's id (never its URL, which may carry a token): `h2h_notify_endpoint_disabled{endpoint,reason}`
 * (1 for the reason it is disabled: `gone`, it answered 410; `operator`, `endpoints disable`),
 * `h2h_notify_pending{endpoint}`, `h2h_notify_retrying{endpoint}` (pending whose last attempt
 * failed) and `h2h_notify_oldest_pending_age_seconds{endpoint}` (0 when none is pending).
 */
export function createNotifyMetrics(registry = new Registry(), source?: NotifyMetricsSource): NotifyMetrics {
  const deliveries = new Counter({
    name: 'h2h_notify_deliveries_total',
    help: 'Notification delivery attempts to the shop by outcome: delivered (2xx), retrying, gave_up (the schedule ran out), disabled (410), skipped',
    labelNames: ['outcome'],
    registers: [registry],
  });
  for (const outcome of DELIVERY_OUTCOMES) deliveries.inc({ outcome }, 0);
  const duration = new Histogram({
    name: 'h2h_notify_delivery_duration_seconds',
    help: 'Time from sending a notification to its answer (or to giving up waiting)',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15],
    registers: [registry],
  });
  const dispatched = new Counter({
    name: 'h2h_notify_dispatched_total',
    help: 'Notifications added to the outbox from the change feed (one per endpoint and event)',
    registers: [registry],
  });
  if (source) registerEndpointGauges(registry, source);
  return {
    registry,
    countDelivery(outcome, durationMs) {
      deliveries.inc({ outcome });
      if (durationMs !== null) duration.observe(durationMs / 1000);
    },
    countDispatched: (n) => dispatched.inc(n),
  };
}

interface EndpointFigures {
  endpoint: NotifyEndpoint;
  backlog: OutboxBacklog;
}

function registerEndpointGauges(registry: Registry, source: NotifyMetricsSource): void {
  const now = source.now ?? Date.now;
  let last: EndpointFigures[] = [];
  const read = async () => {
    try {
      const figures: EndpointFigures[] = [];
      for (const endpoint of await source.endpoints.list()) {
        figures.push({
          endpoint,
          backlog: await source.outbox.backlog(endpoint, wantedTypes(endpoint.events)),
        });
      }
      last = figures;
    } catch {
      // the database is closing or unreachable: keep the last figures (`h2h_store_up` says why)
    }
    return last;
  };
  const scraped = scrapedGauges(registry, read);
  const gauge = (
    name: string,
    help: string,
    labelNames: readonly string[],
    set: (gauge: Gauge, endpoint: string, figures: EndpointFigures) => void,
  ) => scraped(name, help, labelNames, (g, figures) => set(g, String(figures.endpoint.id), figures));
  gauge(
    'h2h_notify_endpoint_disabled',
    'Whether a notification endpoint is disabled, by reason: gone (it answered 410), operator (endpoints disable).',
    ['endpoint', 'reason'],
    (g, endpoint, { endpoint: e }) => {
      const reason = e.disabledAt === null ? null : e.disabledReason === GONE_REASON ? 'gone' : 'operator';
      for (const r of ['gone', 'operator']) g.set({ endpoint, reason: r }, r === reason ? 1 : 0);
    },
  );
  gauge(
    'h2h_notify_pending',
    'Notifications of an endpoint not delivered yet (in the outbox, or not added to it yet).',
    ['endpoint'],
    (g, endpoint, { backlog }) => g.set({ endpoint }, backlog.pending),
  );
  gauge(
    'h2h_notify_retrying',
    'Pending notifications of an endpoint whose last attempt failed, waiting for the next on the schedule.',
    ['endpoint'],
    (g, endpoint, { backlog }) => g.set({ endpoint }, backlog.failing),
  );
  gauge(
    'h2h_notify_oldest_pending_age_seconds',
    'Age of an endpoint’s oldest pending notification, since its commit (0 when none is pending).',
    ['endpoint'],
    (g, endpoint, { backlog }) =>
      g.set(
        { endpoint },
        backlog.oldestPendingAt === null ? 0 : Math.max(0, (now() - backlog.oldestPendingAt) / 1000),
      ),
  );
}
