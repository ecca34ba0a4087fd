import { DelayedError, type Job, UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { POLL_REQUEST_QUEUE, type PollRequestData } from '../queue/poll-request-queue.js';
import { DEFAULT_QUEUE_PREFIX } from '../queue/webhook-queue.js';
import { settlesWithin } from '../shared/deadline.js';
import { watchedRedis } from '../shared/redis-outage.js';
import { DEFAULT_UPSTREAM } from '../upstream/model.js';
import type { EarlyPollResult } from './early-poll.js';

/** One upstream's reconciler as the poll requests see it: its early poll, with its client and budget. */
export interface EarlyPoller {
  readonly upstream: string;
  pollNow(ref: string): Promise<EarlyPollResult>;
}

export interface PollRequestWorkerOptions {
  /** Every upstream's reconciler in this process. */
  pollers: readonly EarlyPoller[];
  redisUrl: string;
  /** BullMQ key prefix; must match the receiver's and the API's. Default: `bull`. */
  queuePrefix?: string;
  logger?: Logger;
}

/** The running worker of {@link startPollRequestWorker}. */
export interface PollRequestWorker {
  /** Stops taking requests, lets the active polls finish (up to `timeoutMs`), closes its connection. */
  close(options: { timeoutMs: number }): Promise<boolean>;
}

/**
 * Takes the early-poll requests of `h2h-poll-requests` (stale but authentic webhooks, the shop's
 * refresh) and hands each to the reconciler of its upstream, whose client and budget poll it:
 * the request's `upstream` (the webhook's), else the default's; an order that turns out to be
 * another upstream's (a shop request names it by partner_ref only) goes on to that upstream's
 * reconciler. One queue for every upstream, so the receiver and the API need not know the
 * reconcilers. As many polls at once as there are upstreams (an upstream that is slow to answer
 * leaves the others a slot), and a request that meets its upstream's spent budget is delayed,
 * not failed, so one upstream's budget never holds up another's polls (each draws from its own). Resolves once the worker is connected.
 */
export async function startPollRequestWorker(options: PollRequestWorkerOptions): Promise<PollRequestWorker> {
  const { logger } = options;
  const pollers = new Map(options.pollers.map((poller) => [poller.upstream, poller]));
  const { connection, outage } = watchedRedis({
    url: options.redisUrl,
    component: 'poll requests',
    logger,
    redis: { maxRetriesPerRequest: null, connectionName: 'h2h-poll-requests' },
  });
  const pollerOf = (upstream: string): EarlyPoller => {
    const poller = pollers.get(upstream);
    if (!poller) {
      throw new UnrecoverableError(
        `the poll request names upstream "${upstream}", which this worker does not reconcile (H2H_UPSTREAMS_FILE)`,
      );
    }
    return poller;
  };

  const worker = new Worker<PollRequestData, EarlyPollResult['kind']>(
    POLL_REQUEST_QUEUE,
    async (job: Job<PollRequestData>, token?: string) => {
      const ref = job.data.partnerRef ?? job.data.invoiceNumber;
      if (!ref) throw new UnrecoverableError('the poll request names no partner_ref or invoice number');
      let result = await pollerOf(job.data.upstream ?? DEFAULT_UPSTREAM).pollNow(ref);
      if (result.kind === 'other_upstream' && pollers.has(result.order.upstream)) {
        result = await pollerOf(result.order.upstream).pollNow(ref);
      }
      if (result.kind !== 'kept') {
        logger?.debug({ ref, reason: job.data.reason, result: result.kind }, 'early poll done');
        return result.kind;
      }
      if (result.reason === 'budget' || result.reason === 'rate_limited') {
        // Not a failure: try again when a poll slot frees, without spending an attempt.
        await job.moveToDelayed(Date.now() + (result.retryAfterMs ?? 1000) + 10, token);
        throw new DelayedError();
      }
      if (result.reason === 'unauthorized') throw new UnrecoverableError(result.error.message);
      throw new Error(result.error.message); // 5xx or no answer: the job's backoff retries it
    },
    {
      connection,
      prefix: options.queuePrefix ?? DEFAULT_QUEUE_PREFIX,
      concurrency: Math.max(1, pollers.size),
      autorun: false,
    },
  );
  worker.on('error', outage.error);
  try {
    void worker.run();
    await worker.waitUntilReady();
  } catch (error) {
    await settlesWithin(worker.close(true), 2_000);
    connection.disconnect();
    throw error;
  }

  let closing: Promise<boolean> | undefined;
  return {
    close({ timeoutMs }) {
      closing ??= (async () => {
        const graceful = await settlesWithin(worker.close(), timeoutMs);
        connection.disconnect();
        return graceful;
      })();
      return closing;
    },
  };
}
