import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { registerQueueDepthGauge } from '../queue/queue-depth.js';
import type { WebhookProducer } from '../queue/webhook-producer.js';
import type { RECEIVER_ERRORS } from './errors.js';

/** What happened to one webhook request: accepted, duplicate, or an error code in lower case. */
export type WebhookOutcome = 'accepted' | 'duplicate' | Lowercase<keyof typeof RECEIVER_ERRORS>;

/** The receiver's Prometheus metrics, in a registry of their own. */
export interface ReceiverMetrics {
  readonly registry: Registry;
  /** Counts one webhook request by outcome. */
  countRequest(outcome: WebhookOutcome): void;
  /** Counts a delivery whose event id header differs from the event_id of its signed body. */
  countEventIdMismatch(): void;
  /** Records the verify-and-enqueue time of an accepted (or duplicate) webhook. */
  observeEnqueue(seconds: number): void;
}

/**
 * Creates `h2h_webhook_requests_total{outcome}`, `h2h_webhook_event_id_mismatch_total`,
 * `h2h_webhook_enqueue_seconds` and
 * `h2h_queue_jobs{queue,state}` (read from Redis at each scrape; absent while Redis is
 * unavailable), plus Node's default process metrics.
 */
export function createReceiverMetrics(producer: WebhookProducer): ReceiverMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  const requests = new Counter({
    name: 'h2h_webhook_requests_total',
    help: 'Webhook requests by outcome: accepted, duplicate, or the error code in lower case.',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  for (const outcome of ['accepted', 'duplicate', 'signature_missing', 'invalid_signature'] as const) {
    requests.inc({ outcome }, 0);
  }

  const enqueueSeconds = new Histogram({
    name: 'h2h_webhook_enqueue_seconds',
    help: 'Time from the start of verification to Redis acknowledging the job, for accepted webhooks.',
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });

  const mismatches = new Counter({
    name: 'h2h_webhook_event_id_mismatch_total',
    help: 'Authentic webhooks whose X-Event-Id header differs from the event_id of the signed body (deduplicated on the body).',
    registers: [registry],
  });

  registerQueueDepthGauge(registry, () => producer.jobCounts());

  // One child per outcome, looked up once: inc() with a label object hashes the labels each time.
  const byOutcome = new Map<WebhookOutcome, { inc(): void }>();
  return {
    registry,
    countRequest(outcome) {
      let counter = byOutcome.get(outcome);
      if (!counter) {
        counter = requests.labels({ outcome });
        byOutcome.set(outcome, counter);
      }
      counter.inc();
    },
    countEventIdMismatch: () => mismatches.inc(),
    observeEnqueue: (seconds) => enqueueSeconds.observe(seconds),
  };
}
