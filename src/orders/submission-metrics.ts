import { Gauge, type Registry } from 'prom-client';
import { oneReadPerScrape } from '../shared/scrape-read.js';
import type { OrderQueries } from '../store/order-queries.js';

/**
 * Registers, on `registry`, each upstream's submission queue (the shop API's orders waiting for
 * their pump: docs/api.md, "Placing orders") as the store holds it at each scrape:
 * `h2h_submission_queued_orders{upstream}` and
 * `h2h_submission_oldest_queued_age_seconds{upstream}` (0 when none waits). An order older than
 * `API_SUBMISSION_MAX_AGE_S` is cancelled `EXPIRED`, so an age that climbs towards it means
 * orders the shop took will not be sent. A scrape the store does not answer keeps the last
 * figures (`h2h_store_up` says why).
 */
export function registerSubmissionGauges(
  registry: Registry,
  queries: Pick<OrderQueries, 'submissionBacklog'>,
  upstreams: readonly string[],
  now: () => number = Date.now,
): void {
  const registers = [registry];
  const last = new Map(upstreams.map((u) => [u, { queued: 0, ageS: 0 }]));
  const read = oneReadPerScrape(async () => {
    for (const upstream of upstreams) {
      try {
        const { queued, oldestQueuedAt } = await queries.submissionBacklog(upstream);
        const ageS = oldestQueuedAt === null ? 0 : Math.max(0, (now() - oldestQueuedAt) / 1000);
        last.set(upstream, { queued, ageS });
      } catch {
        // the database is closing or unreachable: keep the last figures
      }
    }
    return last;
  });
  new Gauge({
    name: 'h2h_submission_queued_orders',
    help: 'Orders waiting in the submission queue to be sent upstream (the shop API’s), per upstream.',
    labelNames: ['upstream'] as const,
    registers,
    async collect() {
      for (const [upstream, { queued }] of await read()) this.set({ upstream }, queued);
    },
  });
  new Gauge({
    name: 'h2h_submission_oldest_queued_age_seconds',
    help: 'Age of the oldest order waiting in the submission queue, per upstream (0 when none waits).',
    labelNames: ['upstream'] as const,
    registers,
    async collect() {
      for (const [upstream, { ageS }] of await read()) this.set({ upstream }, ageS);
    },
  });
}
