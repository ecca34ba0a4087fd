import type { Job, Queue } from 'bullmq';
import { orderRefOf } from '../store/feed.js';
import { type DeliverDeps, releaseSuccessor } from './deliver-notification.js';
import type { NotifyJobData } from './notify-queue.js';

/**
 * A notification job that failed for good ("parked" in BullMQ's failed set) always leaves a
 * `gave_up` row in the delivery history, so `notifications failed|retry` and `status` see it and
 * the order's next event stops waiting for it. The delivery itself records the usual case (the
 * last HTTP attempt failed); this module records the others, where the job failed without the
 * delivery getting there:
 * - an error outside the HTTP attempt on the last attempt (the store or Redis failing meanwhile);
 * - a job stalled more than its limit (its worker died or hung mid-delivery again and again):
 *   BullMQ fails it without running the processor;
 * - a process that died between the job's failure and its record: {@link sweepParkedJobs} at
 *   start-up finds it in the failed set.
 */

/** Failed jobs the start-up sweep reads at most, newest first. */
const SWEEP_MAX_JOBS = 2_000;

/**
 * Records `gave_up` for a job that failed for good, unless the event's latest attempt at the
 * endpoint is settled already or was made after the job failed (a later retry or replay, which
 * records its own outcome), or the shop had answered it 2xx: a job whose 2xx was noted and that
 * then failed (stalled past its limit, or its record not written on its last attempt) is
 * recorded `delivered` from its note (src/notify/delivered-records.ts). Returns whether it
 * recorded `gave_up`.
 */
export async function recordParkedJob(deps: DeliverDeps, job: Job<NotifyJobData>): Promise<boolean> {
  const { endpointId, seq } = job.data;
  const noted = await deps.delivered?.find(String(job.id));
  if (noted) {
    await deps.delivered!.settle(String(job.id), noted, await deps.store.feed.get(seq));
    return false;
  }
  const failedAt = job.finishedOn ?? deps.now();
  const latest = await deps.store.deliveries.latest(endpointId, seq);
  const event = await deps.store.feed.get(seq);
  const recorded = await deps.store.deliveries.recordUnlessSettled(
    {
      endpointId,
      seq,
      type: event?.type ?? latest?.type ?? 'unknown',
      partnerRef: (event && orderRefOf(event)) ?? latest?.partnerRef ?? null,
      attempt: Math.max(job.attemptsMade, 1) + (job.data.attemptsBefore ?? 0),
      requestedAt: failedAt,
      status: null,
      durationMs: null,
      error: `the notification job failed for good: ${job.failedReason || 'no reason given'}`,
      outcome: 'gave_up',
    },
    failedAt,
  );
  if (!recorded) return false;
  deps.metrics.countDelivery('gave_up', null);
  await releaseSuccessor(deps, endpointId, seq, event);
  return true;
}

/**
 * Records the failed jobs of the notification queue that have no `gave_up` row (their process
 * died before it wrote one): the newest {@link SWEEP_MAX_JOBS}. Returns how many it recorded.
 */
export async function sweepParkedJobs(deps: DeliverDeps, queue: Queue<NotifyJobData>): Promise<number> {
  let recorded = 0;
  const page = 200;
  for (let start = 0; start < SWEEP_MAX_JOBS; start += page) {
    const jobs = await queue.getFailed(start, start + page - 1);
    for (const job of jobs) {
      if (job?.data && (await recordParkedJob(deps, job))) recorded += 1;
    }
    if (jobs.length < page) break;
  }
  return recorded;
}
