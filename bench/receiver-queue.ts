import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { DEFAULT_QUEUE_PREFIX, WEBHOOK_QUEUE, webhookIdentity } from '../src/queue/webhook-queue.js';
import { DeliveryLog } from './webhook-deliveries.js';

/** bench/receiver.ts's look into Redis: its process id, and whether each 2xx'd event is queued. */

export async function serverPid(redisUrl: string): Promise<number | undefined> {
  const redis = new Redis(redisUrl);
  try {
    return Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1]) || undefined;
  } finally {
    redis.disconnect();
  }
}

export interface QueueCheck {
  jobs: number;
  acknowledged: number;
  missing: number;
  unknown: number;
}

/**
 * Every acknowledged event must be in Redis; any other job must be a request cut in flight (at
 * the end of this run or an earlier one: the earlier run's may land after its check).
 * Then empties Redis for the next round.
 */
export async function checkQueue(redisUrl: string, log: DeliveryLog): Promise<QueueCheck> {
  const redis = new Redis(redisUrl);
  const queue = new Queue(WEBHOOK_QUEUE, { connection: redis, prefix: DEFAULT_QUEUE_PREFIX });
  try {
    // No worker runs: every job the receiver added is waiting.
    const jobIds = new Set(await queue.getRanges(['wait'], 0, -1));
    const idOf = (eventId: string) =>
      webhookIdentity(Buffer.from(JSON.stringify({ event_id: eventId }))).jobId;
    let missing = 0;
    for (const eventId of log.acknowledged) if (!jobIds.has(idOf(eventId))) missing += 1;
    const sentIds = new Set([...DeliveryLog.everSent].map(idOf));
    let unknown = 0;
    for (const jobId of jobIds) if (!sentIds.has(jobId)) unknown += 1;
    await redis.flushall();
    return { jobs: jobIds.size, acknowledged: log.acknowledged.size, missing, unknown };
  } finally {
    await queue.close();
    redis.disconnect();
  }
}

export async function flushRedis(redisUrl: string): Promise<void> {
  const redis = new Redis(redisUrl);
  try {
    await redis.flushall();
  } finally {
    redis.disconnect();
  }
}

/** How many times Redis has run `command` since it started (`INFO commandstats`). */
export async function commandCalls(redisUrl: string, command: string): Promise<number> {
  const redis = new Redis(redisUrl);
  try {
    const stats = await redis.info('commandstats');
    return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
  } finally {
    redis.disconnect();
  }
}
