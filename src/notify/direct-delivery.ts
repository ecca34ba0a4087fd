import type { Logger } from 'pino';
import { type FeedEvent, orderRefOf } from '../store/feed.js';
import type { DeliveryOutcome } from '../store/notify-deliveries.js';
import type { NotifyEndpoint } from '../store/notify-endpoints.js';
import {
  attemptRecord,
  type DeliverDeps,
  notificationId,
  pendingPredecessor,
  recordAttempt,
  releaseSuccessor,
  sendNotification,
} from './deliver-notification.js';
import { type NotifyJobData, notifyJobId, notifyJobName, notifyJobOptions } from './notify-queue.js';
import { retryDelayMs } from './retry-schedule.js';

/**
 * The dispatcher's own deliveries (docs/performance.md, "Notifications"): the first attempt at an
 * event the dispatcher has just read is made by the dispatcher's process at once, without a
 * BullMQ job. A job costs three Lua scripts and some forty Redis commands (add, take, complete),
 * and at 500 events/s those were a third of the worker's CPU; the machine ran at three quarters
 * of its two cores and the tail of the latency grew with every other load on it.
 *
 * Jobs stay for everything but the first attempt of the happy path:
 * - a failed first attempt is recorded and becomes a job that retries on the schedule (its
 *   attempts counted on from the first: {@link NotifyJobData.attemptsBefore});
 * - an event whose order has an earlier event still on its way somewhere else (a job retrying
 *   it, another process) becomes a job at once, which waits for it (order-wait.ts); and so do the
 *   order's later events behind it;
 * - past `limit` deliveries in flight, and for a backlog's full pages, the dispatcher adds jobs
 *   as before (dispatcher.ts).
 *
 * Nothing is lost. A delivery answered 2xx is noted in Redis and recorded like a job's
 * (delivered-records.ts). The dispatcher writes an endpoint's cursor only up to the first event
 * whose delivery here has not settled yet ({@link unsettledFrom}), so a process that dies
 * mid-delivery leaves the cursor before it, and the next holder of the dispatcher lease
 * (notifier.ts) reads those events again. It looks each of them up first
 * (`recoverUpTo`: recorded, noted, or a job of its own): only one whose POST had no answer yet
 * is sent again, which receivers dedupe on `webhook-id`.
 */

/** What became of an event taken here; the order's next event goes at once only after `settled`. */
type Ending = 'settled' | 'queued';

/** Pause before adding a job again after Redis refused it. */
const QUEUE_RETRY_MS = 1_000;

export interface DirectDeliveriesOptions {
  deps: DeliverDeps;
  /** The retry schedule, ms; its length is the number of retries. */
  scheduleMs: readonly number[];
  /** Deliveries in flight at once (the notifier's concurrency); past it events go to jobs. */
  limit: number;
  /**
   * Whether this process may still send first attempts (the dispatcher lease surely held),
   * looked at just before each POST. Default: always.
   */
  valid?: () => boolean;
  logger?: Logger;
}

export class DirectDeliveries {
  readonly #deps: DeliverDeps;
  readonly #scheduleMs: readonly number[];
  readonly #limit: number;
  readonly #valid: () => boolean;
  readonly #logger: Logger | undefined;
  /** The last event taken of each order at each endpoint (`<endpoint>:<ref>`) and how it ended. */
  readonly #chains = new Map<string, Promise<Ending>>();
  /** The events taken and not settled yet, by endpoint. */
  readonly #unsettled = new Map<number, Set<number>>();
  readonly #running = new Set<Promise<Ending>>();
  #closing = false;

  constructor(options: DirectDeliveriesOptions) {
    this.#deps = options.deps;
    this.#scheduleMs = options.scheduleMs;
    this.#limit = options.limit;
    this.#valid = options.valid ?? (() => true);
    this.#logger = options.logger;
  }

  /** Deliveries taken and not ended yet. */
  get inFlight(): number {
    return this.#running.size;
  }

  /**
   * Takes as many of `events` (read by the dispatcher in feed order, wanted by `endpoint`) as
   * there are free places, and starts delivering them; returns the rest, for jobs. Events up to
   * `recoverUpTo` may have been delivered by a process that held the lease before: each is
   * looked up before it is sent.
   */
  take(endpoint: NotifyEndpoint, events: readonly FeedEvent[], recoverUpTo: number): FeedEvent[] {
    const free = this.#closing ? 0 : Math.max(0, this.#limit - this.#running.size);
    for (const event of events.slice(0, free)) this.#start(endpoint, event, event.seq <= recoverUpTo);
    return events.slice(free);
  }

  /** Whether the endpoint's event `seq` was taken here and its delivery has not settled. */
  isUnsettled(endpointId: number, seq: number): boolean {
    return this.#unsettled.get(endpointId)?.has(seq) ?? false;
  }

  /**
   * The first event taken for the endpoint whose delivery has not settled here, or undefined: the
   * dispatcher writes the endpoint's cursor only up to just before it.
   */
  unsettledFrom(endpointId: number): number | undefined {
    const seqs = this.#unsettled.get(endpointId);
    if (!seqs || seqs.size === 0) return undefined;
    let first = Number.POSITIVE_INFINITY;
    for (const seq of seqs) first = Math.min(first, seq);
    return first;
  }

  /** Takes nothing more and waits for the deliveries in flight (each bounded by the POST's timeout). */
  async drain(): Promise<void> {
    this.#closing = true;
    while (this.#running.size > 0) await Promise.all(this.#running);
  }

  #start(endpoint: NotifyEndpoint, event: FeedEvent, recovering: boolean): void {
    const deps = this.#deps;
    const ref = orderRefOf(event);
    const chainKey = ref === undefined ? undefined : `${endpoint.id}:${ref}`;
    const before = chainKey === undefined ? undefined : this.#chains.get(chainKey);
    const unsettled = this.#unsettled.get(endpoint.id) ?? new Set<number>();
    this.#unsettled.set(endpoint.id, unsettled.add(event.seq));
    const ended = deps.running.start(endpoint.id, event.seq);
    const run = (async (): Promise<Ending> => {
      try {
        // The order's earlier event taken here goes first; if it went to a job, so does this one.
        // So does one whose turn comes while the notifier closes: it waits for no more POSTs.
        if ((await before) === 'queued' || this.#closing) return await this.#queue(endpoint.id, event, 0);
        return await this.#deliver(endpoint.id, event, recovering);
      } catch (err) {
        this.#logger?.warn(
          { err, endpointId: endpoint.id, seq: event.seq },
          'a notification could not be delivered at once; it goes to the queue',
        );
        return await this.#queue(endpoint.id, event, 0);
      } finally {
        ended();
      }
    })();
    // A run that neither settled nor queued its event (Redis refused the job while the notifier
    // closed) leaves it unsettled: the cursor stays before it, and the next start reads it again.
    const kept = run.then(
      (ending) => {
        unsettled.delete(event.seq);
        return ending;
      },
      (): Ending => 'queued',
    );
    this.#running.add(kept);
    if (chainKey !== undefined) this.#chains.set(chainKey, kept);
    void kept.then(() => {
      this.#running.delete(kept);
      if (chainKey !== undefined && this.#chains.get(chainKey) === kept) this.#chains.delete(chainKey);
    });
  }

  async #deliver(endpointId: number, event: FeedEvent, recovering: boolean): Promise<Ending> {
    const deps = this.#deps;
    const { seq } = event;
    const hint = deps.hints?.take(endpointId, seq);
    if (recovering && (await this.#handledBefore(endpointId, seq))) return 'settled';
    // As of now, not as the pass read it: the event may have waited for an earlier one of its
    // order, meanwhile the endpoint may have answered 410 or been disabled (delivery-hints.ts).
    const endpoint = deps.hints?.endpoint(endpointId) ?? (await deps.store.endpoints.get(endpointId));
    if (!endpoint || endpoint.disabledAt !== null) {
      const answer = { error: 'the endpoint is disabled' };
      await recordAttempt(
        deps,
        attemptRecord({
          endpointId,
          seq,
          event,
          attempt: 1,
          outcome: 'skipped',
          answer,
          requestedAt: deps.now(),
        }),
      );
      return 'settled';
    }
    // The order's previous event at the endpoint (taken here and settled: noted, no I/O; or
    // anywhere else, such as a job retrying it, or over the limit) must be settled first.
    if ((await pendingPredecessor(deps, endpoint, event, hint?.previous)) !== undefined) {
      return this.#queue(endpoint.id, event, 0);
    }

    // The lease may have run out while this waited: another dispatcher may send the event now.
    // A job (its deterministic id) is what that one looks for, and the job looks for its note.
    if (!this.#valid()) return this.#queue(endpoint.id, event, 0);
    const { requestedAt, answer } = await sendNotification(deps, endpoint, event);
    const attempt = (outcome: DeliveryOutcome) =>
      attemptRecord({ endpointId, seq, event, attempt: 1, outcome, answer, requestedAt });
    const record = (outcome: DeliveryOutcome) => recordAttempt(deps, attempt(outcome));

    if (answer.status !== null && answer.status >= 200 && answer.status < 300) {
      if (deps.delivered) {
        await deps.delivered.add(notifyJobId(endpoint.id, seq), attempt('delivered'), event);
        deps.metrics.countDelivery('delivered', answer.durationMs ?? null);
      } else {
        await record('delivered');
        await this.#releaseSuccessor(endpoint.id, event);
      }
      return 'settled';
    }
    if (answer.status === 410) {
      await record('disabled');
      await deps.store.endpoints.disable(endpoint.id, `answered 410 Gone to ${notificationId(seq)}`);
      deps.hints?.forgetEndpoint(endpoint.id);
      deps.logger?.warn(
        { endpointId: endpoint.id, url: endpoint.url },
        'notification endpoint answered 410 Gone: disabled',
      );
      // The order's later events go to jobs, which find the endpoint disabled.
      return 'queued';
    }
    if (this.#scheduleMs.length === 0) {
      await record('gave_up');
      await this.#releaseSuccessor(endpoint.id, event);
      return 'settled';
    }
    // The attempt was made: whatever happens to its record, the job goes on from attempt 2.
    await record('retrying').catch((err) =>
      this.#logger?.warn(
        { err, endpointId: endpoint.id, seq },
        'could not record a failed notification attempt',
      ),
    );
    return this.#queue(endpoint.id, event, 1);
  }

  /** Wakes a job waiting for this settled event; a failure only leaves it to its own delay. */
  async #releaseSuccessor(endpointId: number, event: FeedEvent): Promise<void> {
    await releaseSuccessor(this.#deps, endpointId, event.seq, event).catch((err) =>
      this.#logger?.warn(
        { err, endpointId, seq: event.seq },
        'could not wake the next notification of an order',
      ),
    );
  }

  /**
   * Whether a process that held the lease before handled the event already: recorded as settled,
   * noted as delivered (its record not written yet), or given to a job of its own.
   */
  async #handledBefore(endpointId: number, seq: number): Promise<boolean> {
    const deps = this.#deps;
    if (await deps.store.deliveries.isSettled(endpointId, seq)) return true;
    if ((await deps.delivered?.find(notifyJobId(endpointId, seq))) !== undefined) return true;
    return (await deps.queue.getJob(notifyJobId(endpointId, seq))) !== undefined;
  }

  /**
   * Gives the event to a job: after `attemptsBefore` attempts made here (1: the first failed; it
   * is retried on the schedule), or none (it waits for its order's earlier event). Tries again
   * while Redis refuses, until the notifier closes: the event meanwhile holds its endpoint's
   * cursor, so a process that dies with it unqueued leaves it to the next holder.
   */
  async #queue(endpointId: number, event: FeedEvent, attemptsBefore: 0 | 1): Promise<Ending> {
    const retries = this.#scheduleMs.length - attemptsBefore;
    const data: NotifyJobData = {
      endpointId,
      seq: event.seq,
      ...(attemptsBefore > 0 ? { attemptsBefore } : {}),
    };
    const opts = {
      ...notifyJobOptions(retries),
      jobId: notifyJobId(endpointId, event.seq),
      ...(attemptsBefore > 0 ? { delay: retryDelayMs(attemptsBefore, this.#scheduleMs) } : {}),
    };
    for (;;) {
      try {
        await this.#deps.queue.add(notifyJobName(event), data, opts);
        return 'queued';
      } catch (err) {
        if (this.#closing) throw err;
        this.#logger?.warn(
          { err, endpointId, seq: event.seq },
          'could not queue a notification; trying again',
        );
        await new Promise((resolve) => setTimeout(resolve, QUEUE_RETRY_MS));
      }
    }
  }
}
