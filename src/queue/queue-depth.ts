import type { Queue } from 'bullmq';
import { Gauge, type Registry } from 'prom-client';
import { oneReadPerScrape } from '../shared/scrape-read.js';

/** The BullMQ job states counted by {@link queueJobCounts} and `h2h_queue_jobs`. */
export const QUEUE_JOB_STATES = [
  'waiting',
  'active',
  'delayed',
  'prioritized',
  'completed',
  'failed',
  'waiting-children',
] as const;

export type QueueJobState = (typeof QUEUE_JOB_STATES)[number];

/** Job counts of one queue by state. */
export interface QueueJobCounts {
  queue: string;
  counts: Record<QueueJobState, number>;
}

/** Counts the jobs of each queue in every state of {@link QUEUE_JOB_STATES}. */
export async function queueJobCounts(queues: readonly Queue[]): Promise<QueueJobCounts[]> {
  return Promise.all(
    queues.map(async (queue) => {
      const counts = await queue.getJobCounts(...QUEUE_JOB_STATES);
      const byState = Object.fromEntries(QUEUE_JOB_STATES.map((state) => [state, counts[state] ?? 0]));
      return { queue: queue.name, counts: byState as Record<QueueJobState, number> };
    }),
  );
}

/**
 * Registers `h2h_queue_jobs{queue,state}` on `registry`: the job counts `read` answers, read at
 * each scrape. When `read` fails (Redis unavailable or too slow) the gauge has no series rather
 * than stale ones. Also registers `h2h_redis_up`: 1 when that read answered, 0 when it failed,
 * so an alert sees Redis gone from every process that serves the gauge. `read` must bound its
 * own wait, since a scrape waits for it.
 */
export function registerQueueDepthGauge(registry: Registry, read: () => Promise<QueueJobCounts[]>): void {
  const readOnce = oneReadPerScrape(read);
  new Gauge({
    name: 'h2h_queue_jobs',
    help: 'Jobs per queue and BullMQ state, read from Redis at each scrape; absent while Redis does not answer.',
    labelNames: ['queue', 'state'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      let depths: QueueJobCounts[];
      try {
        depths = await readOnce();
      } catch {
        return;
      }
      for (const { queue, counts } of depths) {
        for (const state of QUEUE_JOB_STATES) this.set({ queue, state }, counts[state]);
      }
    },
  });
  new Gauge({
    name: 'h2h_redis_up',
    help: 'Whether Redis answered this scrape’s read of the queue depths in time: 1 yes, 0 no (the receiver then answers webhooks 503, the worker applies nothing).',
    registers: [registry],
    async collect() {
      try {
        await readOnce();
        this.set(1);
      } catch {
        this.set(0);
      }
    },
  });
}
