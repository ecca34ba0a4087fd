import type { JobsOptions } from 'bullmq';
import { jobIdFor, scopedPrefix } from './job-ids.js';

/**
 * Requests to poll one order's status early, ahead of the reconciler's schedule. The receiver
 * produces them (a stale but authentic webhook); the reconciler consumes them.
 */

/** Name of the BullMQ queue of early-poll requests. */
export const POLL_REQUEST_QUEUE = 'h2h-poll-requests';

/** Name of every job on {@link POLL_REQUEST_QUEUE}. */
export const POLL_REQUEST_JOB_NAME = 'poll-order';

/** Why an early poll was requested: a stale but authentic webhook, or the shop (POST /v1/orders/:ref/refresh). */
export type PollReason = 'stale_webhook' | 'shop_request';

/** One early-poll request: at least one of the two references is set. */
export interface PollRequestData {
  partnerRef?: string;
  invoiceNumber?: string;
  reason: PollReason;
  /** The upstream that named the order (a stale webhook's), when not the default one. */
  upstream?: string;
}

/**
 * One job per order while a request is pending: `poll-ref-<partner_ref>` (the partner_ref is
 * the order's stable key), else `poll-inv-<invoice number>`, hashed as {@link jobIdFor} does
 * when the reference is not id-safe. Throws when the request names no order.
 */
export function pollRequestJobId(request: PollRequestData): string {
  // A partner_ref names one order of the store whatever the upstream; an invoice number is one upstream's.
  if (request.partnerRef) return jobIdFor('poll-ref', request.partnerRef);
  if (request.invoiceNumber) {
    return jobIdFor(scopedPrefix('poll-inv', request.upstream), request.invoiceNumber);
  }
  throw new TypeError('a poll request needs a partnerRef or an invoiceNumber');
}

/**
 * Completed requests are removed at once, so the next stale event of the same order can ask
 * again; failed ones are kept a day for inspection (and block repeats for that order meanwhile,
 * which the regular reconciliation covers).
 */
export const POLL_REQUEST_JOB_OPTIONS = {
  attempts: 3,
  backoff: { type: 'exponential', delay: 5_000 },
  removeOnComplete: true,
  removeOnFail: { age: 24 * 3600, count: 10_000 },
} as const satisfies JobsOptions;
