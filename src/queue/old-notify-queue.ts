import { Queue } from 'bullmq';
import type { Logger } from 'pino';
import { createRedis } from '../shared/redis-client.js';
import type { OrderStore } from '../store/order-store.js';

/** The BullMQ queue that carried the notifications before the outbox (version 0.1, schema 16). */
const OLD_NOTIFY_QUEUE = 'h2h-notifications';

/** What a job of that queue held. */
interface OldJobData {
  endpointId: number;
  seq: number;
  /** Attempts made before the job (its dispatcher's own failed first attempt). */
  attemptsBefore?: number;
}

/**
 * The upgrade to the outbox (docs/deployment.md, "Upgrading to the notification outbox"): moves
 * the notifications the old queue still held (dispatched, not yet delivered: waiting, delayed for
 * a retry or behind their order's earlier event, or active in a worker that stopped) into the
 * outbox, each at its attempt and due time, then removes the queue. Events after each endpoint's
 * cursor (the old dispatcher wrote it late) come from the feed as any new event, at attempt 1; the given-up ones are in
 * the history already (`notifications failed`), so the queue's failed and completed jobs are
 * dropped with it. A queue that is gone costs one Redis call. Returns how many notifications it
 * moved.
 */
export async function moveOldNotificationQueue(options: {
  store: Pick<OrderStore, 'outbox'>;
  redisUrl: string;
  prefix?: string;
  logger?: Logger;
}): Promise<number> {
  const connection = createRedis(options.redisUrl);
  const queue = new Queue<OldJobData>(OLD_NOTIFY_QUEUE, {
    connection,
    ...(options.prefix === undefined ? {} : { prefix: options.prefix }),
  });
  try {
    const unfinished = ['waiting', 'delayed', 'active', 'prioritized', 'waiting-children'] as const;
    const counts = await queue.getJobCounts(...unfinished, 'completed', 'failed');
    if (Object.values(counts).every((n) => n === 0)) return 0;
    const jobs = (await queue.getJobs([...unfinished]))
      .filter((job) => job?.data)
      // In feed order: an order's later event then waits in the outbox behind its earlier one.
      .sort((a, b) => a.data.seq - b.data.seq);
    let moved = 0;
    for (const job of jobs) {
      moved += await options.store.outbox.enqueue(job.data.endpointId, [job.data.seq], {
        attempt: job.attemptsMade + (job.data.attemptsBefore ?? 0) + 1,
        nextAt: job.timestamp + (job.delay ?? 0),
      });
    }
    await queue.obliterate({ force: true });
    options.logger?.info({ moved }, 'notifications of the queue before the outbox moved into the outbox');
    return moved;
  } finally {
    await queue.close();
    await connection.quit().catch(() => connection.disconnect());
  }
}
