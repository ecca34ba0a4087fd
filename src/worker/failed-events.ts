import { type Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { jobIdFor } from '../queue/job-ids.js';
import { DEFAULT_QUEUE_PREFIX, WEBHOOK_QUEUE, type WebhookJobData } from '../queue/webhook-queue.js';

/** Characters of the body shown by {@link FailedEvent.bodyPreview}. */
export const BODY_PREVIEW_LENGTH = 80;

/** A webhook job in the failed set, as `h2h-sync events failed` shows it (`--json`: snake_case). */
export interface FailedEvent {
  /** The BullMQ job id (`ev-<event id>`, `evh-<hash>` or `body-<sha256>`): what `events retry` takes. */
  jobId: string;
  /** Why it failed: a parked event's code and reason (`NO_ORDER: …`), or the last transient error. */
  failedReason: string;
  /** Attempts made (1 for a parked event; 10 when the transient retries ran out). */
  attemptsMade: number;
  /** When the receiver accepted the delivery (ISO 8601), if the job says. */
  receivedAt: string | null;
  /** When it last failed (ISO 8601). */
  failedAt: string | null;
  /** The `event_id` of the signed body (null when the body has none or is not JSON). */
  eventId: string | null;
  /** The `X-Event-Id` header as received, or null: not signed, shown for diagnosis only. */
  headerEventId: string | null;
  dedupeKey: string | null;
  /** The start of the body, runs of white space shown as one space; `base64:` and the start for non-UTF-8 bodies. */
  bodyPreview: string;
}

/** What {@link retryFailedEvents} did. */
export interface RetrySummary {
  /** Jobs moved from the failed set back to the queue, with their attempts reset. */
  retried: string[];
  /** Jobs that left the failed set meanwhile (retried by someone else, removed). */
  skipped: string[];
}

/** A webhook event named by `events retry` is not in the queue, or not failed. */
export class FailedEventError extends Error {
  override name = 'FailedEventError';
  constructor(
    readonly code: 'EVENT_NOT_FOUND' | 'EVENT_NOT_FAILED',
    message: string,
  ) {
    super(message);
  }
}

const iso = (ms: unknown): string | null => (typeof ms === 'number' ? new Date(ms).toISOString() : null);

function preview(data: Partial<WebhookJobData> | undefined): string {
  if (typeof data?.rawBody !== 'string') return '';
  const text = data.rawBodyEncoding === 'base64' ? `base64:${data.rawBody}` : data.rawBody;
  const flat = text.replace(/\s+/g, ' ');
  return flat.length > BODY_PREVIEW_LENGTH ? `${flat.slice(0, BODY_PREVIEW_LENGTH - 1)}…` : flat;
}

function toFailedEvent(job: Job<WebhookJobData>): FailedEvent {
  const data = job.data as Partial<WebhookJobData> | undefined;
  return {
    jobId: String(job.id),
    failedReason: job.failedReason ?? '',
    attemptsMade: job.attemptsMade,
    receivedAt: iso(data?.receivedAt),
    failedAt: iso(job.finishedOn),
    eventId: data?.eventId ?? null,
    headerEventId: data?.headerEventId ?? null,
    dedupeKey: data?.dedupeKey ?? null,
    bodyPreview: preview(data),
  };
}

/** The webhook queue, for reading and retrying failed jobs (no worker). */
export function failedEventsQueue(connection: Redis, prefix = DEFAULT_QUEUE_PREFIX): Queue<WebhookJobData> {
  const queue = new Queue<WebhookJobData>(WEBHOOK_QUEUE, { connection, prefix });
  queue.on('error', () => {}); // connection errors surface as rejected calls
  return queue;
}

/** The newest `limit` failed webhook jobs and how many there are in all. */
export async function listFailedEvents(
  queue: Queue<WebhookJobData>,
  limit: number,
): Promise<{ total: number; events: FailedEvent[] }> {
  const [total, jobs] = await Promise.all([queue.getFailedCount(), queue.getFailed(0, limit - 1)]);
  return { total, events: (jobs as Job<WebhookJobData>[]).filter(Boolean).map(toFailedEvent) };
}

/** The job with this id, else the job of the event with this id (`ev-<id>`). */
async function findJob(queue: Queue<WebhookJobData>, id: string): Promise<Job<WebhookJobData> | undefined> {
  return (await queue.getJob(id)) ?? (await queue.getJob(jobIdFor('ev', id)));
}

/**
 * Moves failed webhook jobs back to the queue with their attempts reset (BullMQ `job.retry`):
 * the one named by `id` (a job id from {@link listFailedEvents}, or an event id), or with
 * `'all'` every job failed at the time of the call. A single id that is unknown or not failed
 * throws {@link FailedEventError}; under `'all'` a job that left the failed set meanwhile is
 * skipped.
 */
export async function retryFailedEvents(
  queue: Queue<WebhookJobData>,
  which: { id: string } | 'all',
): Promise<RetrySummary> {
  const summary: RetrySummary = { retried: [], skipped: [] };
  if (which === 'all') {
    const jobs = (await queue.getFailed(0, -1)) as Job<WebhookJobData>[];
    for (const job of jobs.filter(Boolean)) {
      try {
        await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
        summary.retried.push(String(job.id));
      } catch {
        summary.skipped.push(String(job.id));
      }
    }
    return summary;
  }
  const job = await findJob(queue, which.id);
  if (!job) {
    throw new FailedEventError(
      'EVENT_NOT_FOUND',
      `no webhook job has id ${which.id} (or is for event ${which.id}): list failed events with \`h2h-sync events failed\``,
    );
  }
  const state = await job.getState();
  if (state !== 'failed') {
    throw new FailedEventError(
      'EVENT_NOT_FAILED',
      `webhook job ${job.id} is ${state}, not failed: only failed events can be retried`,
    );
  }
  await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
  summary.retried.push(String(job.id));
  return summary;
}
