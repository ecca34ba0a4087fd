import { Counter, Histogram, Registry } from 'prom-client';
import { DELIVERY_OUTCOMES, type DeliveryOutcome } from '../store/notify-deliveries.js';

/** The notification worker's Prometheus metrics, served on the admin port's `/metrics`. */
export interface NotifyMetrics {
  readonly registry: Registry;
  /** One delivery attempt (or skip) and what it came to. */
  countDelivery(outcome: DeliveryOutcome, durationMs: number | null): void;
  /** Notifications added to the outbox from the feed. */
  countDispatched(n: number): void;
}

export function createNotifyMetrics(registry = new Registry()): NotifyMetrics {
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
  return {
    registry,
    countDelivery(outcome, durationMs) {
      deliveries.inc({ outcome });
      if (durationMs !== null) duration.observe(durationMs / 1000);
    },
    countDispatched: (n) => dispatched.inc(n),
  };
}
