import type { JobsOptions } from 'bullmq';
import { type FeedEvent, orderRefOf } from '../store/feed.js';

/**
 * The contract of the notification queue: the dispatcher (src/notify/dispatcher.ts) adds one job
 * per (endpoint, feed event), the notification worker (src/notify/notifier.ts) delivers it.
 */

/** Name of the BullMQ queue of notification deliveries. */
export const NOTIFY_QUEUE = 'h2h-notifications';

/** One delivery of one feed event to one endpoint. */
export interface NotifyJobData {
  endpointId: number;
  seq: number;
  /** A replay (`notifications replay`): sent at once, without waiting for the order's earlier events. */
  replay?: boolean;
  /**
   * Attempts made before the job, by the dispatcher's own delivery (direct-delivery.ts): 1 when
   * its first attempt failed. The job's attempts are numbered on from it, and it has that many
   * fewer.
   */
  attemptsBefore?: number;
  /** Times the job has waited for an earlier event of its order. */
  waits?: number;
}

/**
 * The job id of an event's delivery: deterministic, so adding it again (a dispatcher that
 * crashed before it advanced its cursor) is a no-op while the job is kept. BullMQ refuses `:`
 * in custom ids, hence `ep<id>-<seq>`.
 */
export function notifyJobId(endpointId: number, seq: number): string {
  return `ep${endpointId}-${seq}`;
}

/** A job's name (Bull Board lists it): the event's type and its order's partner_ref. */
export function notifyJobName(event: FeedEvent): string {
  return `${event.type} ${orderRefOf(event) ?? ''}`.trim();
}

/** The `name` BullMQ's `backoff.type` gives the notification worker's own strategy. */
export const NOTIFY_BACKOFF = 'notify-schedule';

/**
 * Job options for a retry schedule of `retries` entries: one attempt plus one per entry.
 * Completed jobs are kept a day, at most 50,000 (a re-added id only matters for the moment
 * between the dispatcher's add and its cursor update; the delivery history is in SQLite), failed
 * ones 30 days, so `notifications retry` and Bull Board find them.
 */
export function notifyJobOptions(retries: number): JobsOptions {
  return {
    attempts: retries + 1,
    backoff: { type: NOTIFY_BACKOFF },
    removeOnComplete: { age: 86_400, count: 50_000 },
    removeOnFail: { age: 30 * 86_400, count: 50_000 },
  };
}
