import { DelayedError, type Job, type Queue } from 'bullmq';
import type { Logger } from 'pino';
import { type FeedEvent, orderRefOf } from '../store/feed.js';
import type { DeliveryOutcome, NotifyDelivery } from '../store/notify-deliveries.js';
import { type NotifyEndpoint, signingSecrets } from '../store/notify-endpoints.js';
import type { OrderStore } from '../store/order-store.js';
import type { DeliveredRecords } from './delivered-records.js';
import type { DeliveryHints } from './delivery-hints.js';
import { matchesEvent } from './event-filter.js';
import type { NotifyMetrics } from './notify-metrics.js';
import { type NotifyJobData, notifyJobId } from './notify-queue.js';
import type { RunningDeliveries, WaitMarks } from './order-wait.js';
import type { PostResult } from './post-notification.js';
import { signNotification } from './signature.js';

/** First wait of an event for an earlier one of its order; it doubles up to the cap. */
const ORDER_WAIT_FIRST_MS = 500;
const ORDER_WAIT_MAX_MS = 300_000;
/**
 * Longest wait of a job for an earlier event's run in the same process before it waits delayed
 * instead (and frees its worker slot): a POST to a slow shop can take up to the timeout.
 */
export const HAND_OFF_MAX_WAIT_MS = 5_000;
/** How much longer than its delay a waiting job's mark is kept (src/notify/order-wait.ts). */
const ORDER_WAIT_MARK_EXTRA_MS = 60_000;

export interface DeliverDeps {
  store: Pick<OrderStore, 'feed' | 'endpoints' | 'deliveries'>;
  queue: Queue<NotifyJobData>;
  /** The deliveries running in this process: a later event of an order awaits its earlier one's run here (src/notify/order-wait.ts). */
  running: RunningDeliveries;
  /** Longest hand-off wait (default {@link HAND_OFF_MAX_WAIT_MS}). */
  handOffMaxWaitMs?: number;
  /** The marks in Redis of the jobs that wait, delayed, for an earlier event of their order. */
  marks: WaitMarks;
  post: (url: string, headers: Record<string, string>, body: string) => Promise<PostResult>;
  metrics: NotifyMetrics;
  now: () => number;
  /**
   * Records an attempt in the delivery history; the notifier passes its group commit, so the
   * records of the deliveries in flight share one transaction (one fsync). Default:
   * `store.deliveries.record`, one transaction each.
   */
  record?: (attempt: Omit<NotifyDelivery, 'id'>) => Promise<NotifyDelivery>;
  /**
   * The records of delivered attempts, written after their jobs complete (src/notify/
   * delivered-records.ts). Absent: a delivery's record is durable before its job completes.
   */
  delivered?: DeliveredRecords;
  /** What this process's dispatcher read for the job's first run (delivery-hints.ts). */
  hints?: DeliveryHints;
  logger?: Logger;
}

/** What a notification job came to (its return value in Bull Board). */
export type DeliverResult = DeliveryOutcome;

/** The Standard Webhooks body: `{type, timestamp, data}`, `data` the whole public order (or product, balance). */
export function notificationBody(event: FeedEvent): string {
  return JSON.stringify({ type: event.type, timestamp: event.timestamp, data: event.data });
}

/** The message id of an event, the same on every attempt and replay: receivers dedupe on it. */
export const notificationId = (seq: number): string => `evt_${seq}`;

/** What an attempt's answer says, for its record (nothing when none was sent). */
export type AttemptAnswer = Partial<Pick<NotifyDelivery, 'status' | 'durationMs' | 'error'>>;

/** The record of one attempt at the endpoint's event `seq` (`event`: undefined once pruned). */
export function attemptRecord(a: {
  endpointId: number;
  seq: number;
  event: FeedEvent | undefined;
  attempt: number;
  outcome: DeliveryOutcome;
  answer: AttemptAnswer;
  requestedAt: number;
}): Omit<NotifyDelivery, 'id'> {
  return {
    endpointId: a.endpointId,
    seq: a.seq,
    type: a.event?.type ?? 'unknown',
    partnerRef: (a.event && orderRefOf(a.event)) ?? null,
    attempt: a.attempt,
    requestedAt: a.requestedAt,
    status: a.answer.status ?? null,
    durationMs: a.answer.durationMs ?? null,
    error: a.answer.error ?? null,
    outcome: a.outcome,
  };
}

/** Writes an attempt's record (through the notifier's group commit when it has one) and counts it. */
export async function recordAttempt(
  deps: Pick<DeliverDeps, 'record' | 'store' | 'metrics'>,
  attempt: Omit<NotifyDelivery, 'id'>,
): Promise<void> {
  await (deps.record ? deps.record(attempt) : deps.store.deliveries.record(attempt));
  deps.metrics.countDelivery(attempt.outcome, attempt.durationMs);
}

/** Signs the event's body with the endpoint's secrets and POSTs it: the answer, and when it was sent. */
export async function sendNotification(
  deps: Pick<DeliverDeps, 'now' | 'post'>,
  endpoint: NotifyEndpoint,
  event: FeedEvent,
): Promise<{ requestedAt: number; answer: PostResult }> {
  const body = notificationBody(event);
  const requestedAt = deps.now();
  const headers = signNotification(
    signingSecrets(endpoint, requestedAt),
    notificationId(event.seq),
    Math.floor(requestedAt / 1000),
    body,
  );
  return { requestedAt, answer: await deps.post(endpoint.url, { ...headers }, body) };
}

/**
 * The earlier event of the same order that this endpoint still waits for (not delivered, not
 * given up), or undefined: the order's events reach the endpoint one after another. `known`: the
 * earlier event's seq, or null for none, when the dispatcher's hint knows it (delivery-hints.ts).
 */
export async function pendingPredecessor(
  deps: DeliverDeps,
  endpoint: NotifyEndpoint,
  event: FeedEvent,
  known: number | null | undefined,
): Promise<number | undefined> {
  // Events of no order (product.price_changed, balance.low) wait for nothing.
  const ref = orderRefOf(event);
  if (ref === undefined) return undefined;
  const last =
    known !== undefined
      ? known
      : ((await deps.store.feed.ofOrder(ref, { after: endpoint.fromSeq, before: event.seq }))
          .filter((e) => matchesEvent(endpoint.events, e.type))
          .at(-1)?.seq ?? null);
  if (last === null || (await predecessorSettled(deps, endpoint.id, last))) return undefined;
  return last;
}

/**
 * Whether the endpoint's event `seq` no longer holds up the order's next one: recorded settled
 * (delivered, given up …), or answered 2xx and not yet recorded, in this process or in one whose
 * note says so (delivered-records.ts). The shop has an event from its 2xx on; the note also
 * covers a process that died before its record, which only the next sweep would write.
 */
async function predecessorSettled(deps: DeliverDeps, endpointId: number, seq: number): Promise<boolean> {
  if (deps.delivered?.isPending(endpointId, seq) || deps.hints?.isSettled(endpointId, seq)) return true;
  if (await deps.store.deliveries.isSettled(endpointId, seq)) return true;
  return (await deps.delivered?.find(notifyJobId(endpointId, seq))) !== undefined;
}

/**
 * Wakes the job of the order's next event at the endpoint if it waits, delayed, for this one: it
 * left a mark naming itself (src/notify/order-wait.ts), taken here with one GETDEL. Nothing can
 * wait when the event is of no order, or when the feed has no later event of its order yet (one
 * committed after this look finds this event settled: call it only once the outcome is recorded);
 * then not even that. `event` undefined (no longer in the feed): the mark is taken anyway.
 */
export async function releaseSuccessor(
  deps: Pick<DeliverDeps, 'marks' | 'queue' | 'store'>,
  endpointId: number,
  seq: number,
  event: FeedEvent | undefined,
) {
  if (event) {
    const ref = orderRefOf(event);
    if (ref === undefined || (await deps.store.feed.ofOrder(ref, { after: seq })).length === 0) return;
  }
  const waiting = await deps.marks.take(endpointId, seq);
  if (waiting === null) return;
  const job = await deps.queue.getJob(waiting);
  // No longer delayed (its delay ran out, or it was promoted already): it runs and looks itself.
  await job?.promote().catch(() => {});
}

/**
 * Delivers one notification job (the processor of the notification worker): signs the event's
 * body with the endpoint's secrets and POSTs it; records the attempt in the delivery history.
 * 2xx: delivered. 410: the endpoint is disabled. Anything else throws, so BullMQ retries on the
 * schedule; the last attempt is recorded as `gave_up`. A job that fails for good any other way
 * (an error outside the HTTP attempt, stalled too often) is recorded by src/notify/parked-jobs.ts. An event whose order has an earlier event
 * still on its way to the endpoint waits (moved to delayed, no attempt spent) until that one is
 * settled.
 */
export async function deliverNotification(
  deps: DeliverDeps,
  job: Job<NotifyJobData>,
  token: string | undefined,
): Promise<DeliverResult> {
  const { endpointId, seq } = job.data;
  const ended = deps.running.start(endpointId, seq);
  try {
    return await deliverOnce(deps, job, token);
  } finally {
    ended();
  }
}

async function deliverOnce(
  deps: DeliverDeps,
  job: Job<NotifyJobData>,
  token: string | undefined,
): Promise<DeliverResult> {
  const { endpointId, seq } = job.data;
  // What this process's dispatcher read (delivery-hints.ts): the event and the order's previous
  // one on the job's first run here, the endpoint on any run while the last pass is recent.
  const hint = deps.hints?.take(endpointId, seq);
  const endpoint = deps.hints?.endpoint(endpointId) ?? (await deps.store.endpoints.get(endpointId));
  const event = hint?.event ?? (await deps.store.feed.get(seq));
  // A job given a failed first attempt made by the dispatcher (direct-delivery.ts) counts on from it.
  const attempt = job.attemptsMade + 1 + (job.data.attemptsBefore ?? 0);
  const attemptOf = (outcome: DeliveryOutcome, answer: AttemptAnswer, requestedAt: number) =>
    attemptRecord({ endpointId, seq, event, attempt, outcome, answer, requestedAt });
  const record = (outcome: DeliveryOutcome, answer: AttemptAnswer, requestedAt = deps.now()) =>
    recordAttempt(deps, attemptOf(outcome, answer, requestedAt));

  // A run of a job that had its 2xx in an earlier run (its worker died before the job completed)
  // finds the note of it and records it instead of sending again (delivered-records.ts). Only a
  // job run before can have one; the note is looked at before the store, because whoever
  // deletes it has written the record first.
  // A job without a hint may also be one the dispatcher queued after its own 2xx was noted
  // (Redis answered the note late: direct-delivery.ts).
  const rerun = job.attemptsStarted > 1 || job.stalledCounter > 0 || job.attemptsMade > 0;
  const noted = rerun || !hint ? await deps.delivered?.find(String(job.id)) : undefined;
  if (noted) {
    await deps.delivered!.settle(String(job.id), noted, event);
    return 'delivered';
  }
  if (!endpoint || endpoint.disabledAt !== null) {
    await record('skipped', { error: 'the endpoint is disabled' });
    return 'skipped';
  }
  if (!event) {
    await record('skipped', { error: 'the event is no longer in the feed (H2H_FEED_RETENTION_D)' });
    return 'skipped';
  }
  // A run of a job whose event the endpoint already answered 2xx to (taken over as stalled, or
  // retried, after its delivery was recorded) sends nothing: the shop had it once. A replay is a
  // deliberate second send; `notifications retry` of a given-up event is not delivered yet.
  if (!job.data.replay && (await deps.store.deliveries.latest(endpointId, seq))?.outcome === 'delivered') {
    return 'delivered';
  }
  let predecessor = job.data.replay
    ? undefined
    : await pendingPredecessor(deps, endpoint, event, hint?.previous);
  // The hand-off: the earlier event is on its way from this process; await that run (bounded:
  // order-wait.ts), then look again.
  if (
    predecessor !== undefined &&
    (await deps.running.handOff(endpointId, predecessor, deps.handOffMaxWaitMs ?? HAND_OFF_MAX_WAIT_MS))
  ) {
    predecessor = await pendingPredecessor(deps, endpoint, event, hint?.previous);
  }
  // Its run ended between the look and the hand-off, and its record is being written.
  if (predecessor !== undefined && deps.delivered?.isPending(endpointId, predecessor))
    predecessor = undefined;
  if (predecessor !== undefined) {
    const waits = job.data.waits ?? 0;
    await job.updateData({ ...job.data, waits: waits + 1 });
    const wait = Math.min(ORDER_WAIT_FIRST_MS * 2 ** waits, ORDER_WAIT_MAX_MS);
    // The mark outlives the delay; past the delay the job runs again and marks again if it must.
    await deps.marks.mark(endpointId, predecessor, String(job.id), wait + ORDER_WAIT_MARK_EXTRA_MS);
    await job.moveToDelayed(Date.now() + wait, token);
    // The predecessor may have settled between the check and the move, and taken the mark while
    // this job was not yet delayed, so its promotion missed: look again, now that the job is
    // delayed. (It records before it takes the mark, so one of the two always sees the other.)
    if (await predecessorSettled(deps, endpointId, predecessor)) await job.promote().catch(() => {});
    throw new DelayedError();
  }

  const { requestedAt, answer } = await sendNotification(deps, endpoint, event);

  if (answer.status !== null && answer.status >= 200 && answer.status < 300) {
    if (deps.delivered) {
      // Noted in Redis now, recorded behind the job (delivered-records.ts), which then wakes
      // the order's next event if it waits delayed.
      await deps.delivered.add(String(job.id), attemptOf('delivered', answer, requestedAt), event);
      deps.metrics.countDelivery('delivered', answer.durationMs ?? null);
      return 'delivered';
    }
    await record('delivered', answer, requestedAt);
    await releaseSuccessor(deps, endpointId, seq, event);
    return 'delivered';
  }
  if (answer.status === 410) {
    await record('disabled', answer, requestedAt);
    await deps.store.endpoints.disable(endpointId, `answered 410 Gone to ${notificationId(seq)}`);
    deps.hints?.forgetEndpoint(endpointId);
    deps.logger?.warn({ endpointId, url: endpoint.url }, 'notification endpoint answered 410 Gone: disabled');
    return 'disabled';
  }
  const last = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
  await record(last ? 'gave_up' : 'retrying', answer, requestedAt);
  if (last) await releaseSuccessor(deps, endpointId, seq, event);
  throw new Error(answer.error ?? `the endpoint answered ${answer.status}`);
}
