import { loadConfig } from '../../config/config.js';
import { connectRedis } from '../../shared/redis-connection.js';
import {
  type FailedEvent,
  failedEventsQueue,
  listFailedEvents,
  retryFailedEvents,
} from '../../worker/failed-events.js';
import { type Column, printPublicJson, renderTable, runAction } from '../output.js';

const failedColumns: Column<FailedEvent>[] = [
  { header: 'Job id', cell: (e) => e.jobId },
  { header: 'Failed reason', cell: (e) => e.failedReason },
  { header: 'Attempts', cell: (e) => e.attemptsMade },
  { header: 'Received', cell: (e) => e.receivedAt },
  { header: 'Event id', cell: (e) => e.eventId },
  { header: 'Body', cell: (e) => e.bodyPreview },
];

/** Opens the webhook queue on REDIS_URL (failing fast with the fix), runs `use`, closes. */
async function withWebhookQueue<T>(
  use: (queue: ReturnType<typeof failedEventsQueue>) => Promise<T>,
): Promise<T> {
  const redis = await connectRedis(loadConfig().redisUrl, { what: 'the webhook queue lives there' });
  const queue = failedEventsQueue(redis);
  try {
    return await use(queue);
  } finally {
    await queue.close().catch(() => {});
    redis.disconnect();
  }
}

/** `events failed`: the parked webhook events, newest first. */
export const eventsFailed = async (flags: { limit: number; json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    const { total, events: failed } = await withWebhookQueue((queue) => listFailedEvents(queue, flags.limit));
    if (flags.json) {
      printPublicJson({ total, events: failed });
      return;
    }
    if (failed.length > 0) process.stdout.write(`${renderTable(failed, failedColumns)}\n`);
    process.stdout.write(
      `${total} failed webhook event${total === 1 ? '' : 's'}${failed.length < total ? ` (newest ${failed.length} shown)` : ''}\n`,
    );
  });
};

/** `events retry ID | --all`: requeues parked events. */
export const eventsRetry = async (id: string | undefined, flags: { all?: boolean; json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    if (Boolean(id) === Boolean(flags.all)) {
      throw Object.assign(new Error('give either a job id (see `h2h-sync events failed`) or --all'), {
        code: 'USAGE',
      });
    }
    const summary = await withWebhookQueue((queue) =>
      retryFailedEvents(queue, flags.all ? 'all' : { id: id! }),
    );
    if (flags.json) {
      printPublicJson(summary);
      return;
    }
    const n = summary.retried.length;
    process.stdout.write(
      `requeued ${n} failed webhook event${n === 1 ? '' : 's'}${n > 0 ? `: ${summary.retried.join(', ')}` : ''}\n`,
    );
    if (summary.skipped.length > 0) {
      process.stdout.write(
        `skipped ${summary.skipped.length} no longer failed: ${summary.skipped.join(', ')}\n`,
      );
    }
  });
};
