import type { Logger } from 'pino';
import { estimatePace, type Histogram, paceBucket } from '../domain/pace-math.js';
import { type FirstPollPlan, firstPollPlan, type PollScheduleSettings } from '../domain/poll-rules.js';
import type { ClaimingStore } from '../store/order-store.js';
import { EVERY_PRODUCT, type PaceFact, type PollPlans } from '../store/poll-plans.js';
import { parseUpstreamTime } from '../upstream/upstream-time.js';

/**
 * The events the pace is learned from (webhooks, and moves to a final state): the most recent
 * ones, so the estimate follows an upstream whose pace changes. At one order a second (about
 * three webhooks each) they span about two hours.
 */
export const PACE_WINDOW_EVENTS = 20_000;

/**
 * Learns `upstream`'s pace from what the store recorded of it (docs/reconciler.md, "When the
 * first poll comes") and writes its first-poll plan of each product (store/poll-plans.ts), which
 * every writer then reads for that upstream's orders. Each upstream's reconciler does it for its
 * own upstream at its start and at the start of each pass, under its pass lock, so one process
 * at a time writes an upstream's plans, and no reconciler writes another's. Returns the plans it
 * wrote.
 *
 * From the last {@link PACE_WINDOW_EVENTS} webhooks and moves to a final state that `upstream`
 * said (an ended attempt's among them): per product, the time from each order's
 * creation upstream to its final state (SUCCESS at its `success_at`, else the event time of the
 * webhook that said so; once per order); and a webhook's delivery delay, from its event time to
 * its arrival. Each distribution is a histogram on logarithmic buckets (pace-math.ts), read as
 * `estimatePace` says: a product's own pace once it has `paceMinSamples`, else every product's
 * together, else the fixed delay. `windowEvents` (default {@link PACE_WINDOW_EVENTS}) is for tests.
 */
export async function learnPace(
  plans: Pick<PollPlans, 'recentEvents' | 'replace'>,
  upstream: string,
  settings: Pick<
    PollScheduleSettings,
    'firstPollDelayMs' | 'firstPollMinMs' | 'firstPollMaxMs' | 'firstPollQuantile' | 'paceMinSamples'
  >,
  { windowEvents = PACE_WINDOW_EVENTS }: { windowEvents?: number } = {},
): Promise<Map<string, FirstPollPlan>> {
  const { firstPollQuantile: quantile = 0, paceMinSamples: minSamples = 1 } = settings;
  const learned = new Map<string, FirstPollPlan>();
  if (quantile === 0) {
    learned.set(EVERY_PRODUCT, firstPollPlan(settings, null));
  } else {
    const { delivery, byProduct, all } = histogramsOf(await plans.recentEvents(upstream, windowEvents));
    const pace = { quantile, minSamples };
    for (const [product, own] of byProduct) {
      const estimate = estimatePace(pace, { delivery, own, all: [] });
      if (estimate) learned.set(product, firstPollPlan(settings, estimate));
    }
    learned.set(EVERY_PRODUCT, firstPollPlan(settings, estimatePace(pace, { delivery, own: null, all })));
  }
  await plans.replace(upstream, learned);
  return learned;
}

/**
 * {@link learnPace} of the claims' upstream with their settings (`store.claims`), as that
 * upstream's reconciler does at its start and each pass: a failure (the store unreachable) is
 * logged and leaves the plans as they were, for the next pass to try again.
 */
export async function relearnPace(
  store: Pick<ClaimingStore, 'pollPlans' | 'claims'>,
  logger: Pick<Logger, 'warn'> | undefined,
): Promise<void> {
  await learnPace(store.pollPlans, store.claims.upstream, store.claims.settings).catch((error: unknown) =>
    logger?.warn({ err: error }, 'the pace could not be learned: the first-poll plans stay as they were'),
  );
}

/** The delivery delays, and the times to a final state per product and of every product, as histograms. */
function histogramsOf(events: readonly PaceFact[]): {
  delivery: Histogram;
  byProduct: Map<string, Histogram>;
  all: Histogram;
} {
  const delivery = new Buckets();
  const all = new Buckets();
  const byProduct = new Map<string, Buckets>();
  const finalSeen = new Set<string>();
  for (const event of events) {
    if (event.source === 'webhook' && event.occurred_at !== null) {
      delivery.add(Math.max(0, event.received_at - event.occurred_at));
    }
    const ms = timeToFinal(event);
    if (ms === null || finalSeen.has(event.partner_ref)) continue;
    finalSeen.add(event.partner_ref);
    all.add(ms);
    // A product coded like the row for every product has no plan of its own.
    const product = event.product_code!;
    if (product === EVERY_PRODUCT) continue;
    const own = byProduct.get(product) ?? new Buckets();
    byProduct.set(product, own);
    own.add(ms);
  }
  return {
    delivery: delivery.histogram(),
    byProduct: new Map([...byProduct].map(([product, buckets]) => [product, buckets.histogram()])),
    all: all.histogram(),
  };
}

/**
 * The time from the order's creation upstream to the final state this event moved it to, in ms,
 * or null when the event says nothing of it: not a move to SUCCESS or FAILED, an order without
 * product or creation time, or no time for the state (a poll that found a FAILED says nothing of
 * when), or clocks that disagree (a negative time).
 */
function timeToFinal(event: PaceFact): number | null {
  // A move to the state: not a serial added to a SUCCESS, a duplicate or an older event.
  if (event.reason !== 'initial' && event.reason !== 'transition') return null;
  if (event.status !== 'SUCCESS' && event.status !== 'FAILED') return null;
  if (event.product_code === null || event.created_at === null) return null;
  const reachedAt =
    event.status === 'SUCCESS' && event.success_at !== null
      ? parseUpstreamTime(event.success_at)
      : event.occurred_at;
  if (reachedAt === null) return null;
  const ms = reachedAt - parseUpstreamTime(event.created_at);
  return Number.isFinite(ms) && ms >= 0 ? ms : null;
}

/** A histogram being filled: a weight per bucket. */
class Buckets {
  readonly #weights = new Map<number, number>();

  add(ms: number): void {
    const bucket = paceBucket(ms);
    this.#weights.set(bucket, (this.#weights.get(bucket) ?? 0) + 1);
  }

  /** In bucket order, as pace-math reads it. */
  histogram(): Histogram {
    return [...this.#weights].sort(([a], [b]) => a - b).map(([bucket, weight]) => ({ bucket, weight }));
  }
}
