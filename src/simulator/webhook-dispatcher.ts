import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { Agent, request } from 'undici';
import { ORDER_UPDATED_EVENT, WEBHOOK_HEADERS, type WebhookEvent } from '../upstream/model.js';
import { signWebhook } from '../upstream/signature.js';
import type { FaultInjector } from './faults.js';
import type { TimingProfile } from './profile.js';
import { type SimOrder, toPublicOrder } from './sim-order.js';
import type { TimerSet } from './timer-set.js';

/** decisions.md, "Webhooks": the waits before attempts 2..6 (multiplied by timeScale). */
export const WEBHOOK_RETRY_DELAYS_MS = [60_000, 300_000, 1_800_000, 7_200_000, 21_600_000] as const;
/** How long a reordered event waits for a newer event of its order before it goes anyway (× timeScale). */
export const REORDER_HOLD_MS = 5_000;
/** How far in the past the `webhook_stale_timestamp` fault puts the signed timestamp. */
export const STALE_TIMESTAMP_OFFSET_S = 600;

/** One delivery attempt, as `GET /__sim/webhooks` lists it. */
export interface WebhookAttemptRecord {
  event_id: string;
  partner_ref: string;
  invoice_number: string;
  /** The order status the event carries. */
  status: string;
  /** The event carries a final state: SUCCESS with a serial, FAILED or REFUNDED. */
  final: boolean;
  /** Where it went; null when neither the order nor the member had a webhook URL. */
  url: string | null;
  /** 1-based; both copies of a duplicated attempt carry the same number. */
  attempt: number;
  /** The receiver's HTTP status, or null without an answer. */
  answer_status: number | null;
  /** Why there was no answer (`dropped`, a timeout, a connection error); null when answered. */
  error: string | null;
  /** True for a 2xx answer within the time-out. */
  delivered: boolean;
  /** The faults applied to this attempt: `bad_signature`, `stale_timestamp`, `duplicate`, `reordered`. */
  faults: string[];
  /** When the attempt was sent (ISO 8601 UTC). */
  at: string;
  /**
   * The wait (ms, × timeScale) before the next attempt of this event, which is scheduled; null
   * when there is none: delivered, lost to `webhook_drop`, or the last attempt (given up).
   */
  next_attempt_in_ms: number | null;
}

/** Counters of `GET /__sim/stats`, over the attempts of the current run. */
export interface WebhookStats {
  /** Distinct events that had at least one attempt. */
  events: number;
  /** Attempt records (both copies of a duplicated attempt count). */
  attempts: number;
  /** Attempts answered 2xx in time. */
  delivered: number;
  /** Attempts lost to the `webhook_drop` fault. */
  dropped: number;
  /** Attempts lost because a refund was planned with lost webhooks. */
  planned_loss: number;
  /**
   * Events carrying a final state (SUCCESS with a serial, FAILED, REFUNDED) that were lost:
   * dropped by `webhook_drop` or `webhook_drop_final`, or a planned loss.
   */
  final_events_lost: number;
  /** Attempts sent twice by the `webhook_duplicate` fault (counted once per attempt). */
  duplicated: number;
  /** Copies signed with a wrong secret (`webhook_bad_signature`), each copy counted. */
  bad_signature: number;
  /** Copies with a stale timestamp, each copy counted. */
  stale_timestamp: number;
  /** Events held back by `webhook_reorder`. */
  reordered: number;
  /** Attempts sent (or about to be) whose record is not written yet. */
  in_flight: number;
}

export interface WebhookDispatcherOptions {
  timers: TimerSet;
  faults: FaultInjector;
  /** Multiplies the retry schedule, the reorder hold and the profile's delivery delays. */
  timeScale: number;
  /** Draws the simulated delay before each attempt (0 under the fast profile). */
  profile: TimingProfile;
  /** A 2xx that does not arrive within this many ms counts as a failed attempt. */
  timeoutMs: number;
  logger: Logger;
}

interface PendingEvent {
  readonly id: string;
  readonly order: SimOrder;
  readonly status: string;
  /** The exact bytes sent on every attempt. */
  readonly body: Buffer;
  reordered: boolean;
  /** The event carries a final state: SUCCESS with a serial, FAILED or REFUNDED. */
  readonly final: boolean;
  /** Every attempt is recorded as dropped and nothing is sent (a refund planned with lost webhooks). */
  lost: boolean;
}

interface Answer {
  answer_status: number | null;
  error: string | null;
}

/**
 * Sends one `order.updated` event per status change, with the retries, signatures and faults of
 * decisions.md, and records every attempt. State is per run: {@link reset} forgets everything
 * and silences attempts still in flight.
 */
export class WebhookDispatcher {
  private readonly agent: Agent;
  private readonly records: WebhookAttemptRecord[] = [];
  private readonly held = new Map<SimOrder, { event: PendingEvent; timer: NodeJS.Timeout | undefined }>();
  private readonly inFlight = new Set<AbortController>();
  /** Attempts between their send and their record (see {@link stats}). */
  private attemptsInFlight = 0;
  /** Bumped by reset and close; an attempt from an older run records nothing and schedules nothing. */
  private run = 0;
  private closed = false;

  constructor(private readonly options: WebhookDispatcherOptions) {
    const { timeoutMs } = options;
    this.agent = new Agent({
      connect: { timeout: timeoutMs },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      connections: 256,
    });
  }

  /** Every attempt so far, in the order the attempts finished. */
  attempts(): readonly WebhookAttemptRecord[] {
    return this.records;
  }

  /**
   * Counts over {@link attempts}. When `in_flight` is 0 in two snapshots with the same counts,
   * no attempt was answered between them that is not counted.
   */
  stats(): WebhookStats {
    const events = new Set<string>();
    const stats: WebhookStats = {
      events: 0,
      attempts: this.records.length,
      delivered: 0,
      dropped: 0,
      planned_loss: 0,
      final_events_lost: 0,
      duplicated: 0,
      bad_signature: 0,
      stale_timestamp: 0,
      reordered: 0,
      in_flight: this.attemptsInFlight,
    };
    const duplicatedAttempts = new Set<string>();
    const reorderedEvents = new Set<string>();
    for (const record of this.records) {
      events.add(record.event_id);
      if (record.delivered) stats.delivered += 1;
      if (record.final && record.error === 'dropped') stats.final_events_lost += 1;
      if (record.faults.includes('planned_loss')) stats.planned_loss += 1;
      else if (record.error === 'dropped') stats.dropped += 1;
      if (record.faults.includes('duplicate')) duplicatedAttempts.add(`${record.event_id}#${record.attempt}`);
      if (record.faults.includes('bad_signature')) stats.bad_signature += 1;
      if (record.faults.includes('stale_timestamp')) stats.stale_timestamp += 1;
      if (record.faults.includes('reordered')) reorderedEvents.add(record.event_id);
    }
    stats.events = events.size;
    stats.duplicated = duplicatedAttempts.size;
    stats.reordered = reorderedEvents.size;
    return stats;
  }

  /** Snapshots the order now and delivers it as one event. */
  enqueue(order: SimOrder, options: { lost?: boolean } = {}): void {
    if (this.closed) return;
    const event = createEvent(order);
    event.lost = options.lost === true;
    const held = this.held.get(order);
    if (held) {
      // webhook_reorder: the newer event goes first, the held older one right after its first attempt.
      this.held.delete(order);
      this.options.timers.cancel(held.timer);
      void this.deliver(event, 1, () => void this.deliver(held.event, 1));
      return;
    }
    if (this.options.faults.roll('webhook_reorder')) {
      event.reordered = true;
      const timer = this.options.timers.schedule(REORDER_HOLD_MS * this.options.timeScale, () => {
        this.held.delete(order);
        void this.deliver(event, 1);
      });
      this.held.set(order, { event, timer });
      return;
    }
    void this.deliver(event, 1);
  }

  /** Forgets the log and held events and silences attempts in flight. The owner clears the timers. */
  reset(): void {
    this.run += 1;
    this.attemptsInFlight = 0;
    for (const controller of this.inFlight) controller.abort();
    this.inFlight.clear();
    this.held.clear();
    this.records.length = 0;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.reset();
    await this.agent.destroy();
  }

  private async deliver(event: PendingEvent, attempt: number, afterAttempt?: () => void): Promise<void> {
    const run = this.run;
    const { faults, timers } = this.options;
    const profileDelay = this.options.profile.webhookDelayMs() * this.options.timeScale;
    const extraDelay = faults.current.webhook_delay_ms + profileDelay;
    if (extraDelay > 0) await timers.sleep(extraDelay);
    if (run !== this.run) return;
    this.attemptsInFlight += 1;
    try {
      await this.attempt(run, event, attempt, afterAttempt);
    } finally {
      if (run === this.run) this.attemptsInFlight -= 1;
    }
  }

  private async attempt(
    run: number,
    event: PendingEvent,
    attempt: number,
    afterAttempt?: () => void,
  ): Promise<void> {
    const { faults, timers } = this.options;
    const at = new Date().toISOString();
    const url = event.order.callback_url ?? event.order.member.webhook_url;
    const applied = event.reordered && attempt === 1 ? ['reordered'] : [];
    let answers: Answer[];
    let lost = false;
    if (url === null) {
      answers = [
        { answer_status: null, error: 'no webhook URL: neither callback_url nor the member webhook_url' },
      ];
    } else if (event.lost) {
      answers = [{ answer_status: null, error: 'dropped' }];
      applied.push('planned_loss');
      lost = true;
    } else if (faults.roll('webhook_drop') || (event.final && faults.roll('webhook_drop_final'))) {
      answers = [{ answer_status: null, error: 'dropped' }];
      lost = true;
    } else {
      let timestamp = Math.floor(Date.now() / 1000);
      if (faults.roll('webhook_stale_timestamp')) {
        timestamp -= STALE_TIMESTAMP_OFFSET_S;
        applied.push('stale_timestamp');
      }
      let secret = event.order.member.api_secret;
      if (faults.roll('webhook_bad_signature')) {
        secret = `${secret}-not-the-member-secret`;
        applied.push('bad_signature');
      }
      const copies = faults.roll('webhook_duplicate') ? 2 : 1;
      if (copies === 2) applied.push('duplicate');
      const headers = {
        'content-type': 'application/json',
        'user-agent': 'h2h-sync-simulator',
        [WEBHOOK_HEADERS.timestamp]: String(timestamp),
        [WEBHOOK_HEADERS.signature]: signWebhook(secret, timestamp, event.body),
        [WEBHOOK_HEADERS.eventId]: event.id,
        [WEBHOOK_HEADERS.eventType]: ORDER_UPDATED_EVENT,
      };
      answers = await Promise.all(Array.from({ length: copies }, () => this.post(url, headers, event.body)));
      if (run !== this.run) return;
    }

    const delivered = answers.some(isDelivered);
    const retryDelay = delivered || lost ? undefined : WEBHOOK_RETRY_DELAYS_MS[attempt - 1];
    const nextAttemptInMs = retryDelay === undefined ? null : retryDelay * this.options.timeScale;
    for (const answer of answers) {
      this.records.push({
        event_id: event.id,
        partner_ref: event.order.partner_ref,
        invoice_number: event.order.invoice_number,
        status: event.status,
        final: event.final,
        url,
        attempt,
        ...answer,
        delivered: isDelivered(answer),
        faults: applied,
        at,
        next_attempt_in_ms: nextAttemptInMs,
      });
    }
    this.options.logger.debug(
      { event_id: event.id, invoice_number: event.order.invoice_number, url, attempt, answers },
      'webhook attempt',
    );
    afterAttempt?.();
    if (delivered || lost) return;
    if (nextAttemptInMs === null) {
      this.options.logger.warn(
        { event_id: event.id, invoice_number: event.order.invoice_number, attempts: attempt },
        'webhook given up',
      );
      return;
    }
    timers.schedule(nextAttemptInMs, () => void this.deliver(event, attempt + 1));
  }

  private async post(url: string, headers: Record<string, string>, body: Buffer): Promise<Answer> {
    const { timeoutMs } = this.options;
    const controller = new AbortController();
    this.inFlight.add(controller);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    try {
      const response = await request(url, {
        method: 'POST',
        headers,
        body,
        dispatcher: this.agent,
        signal: controller.signal,
      });
      await response.body.dump().catch(() => undefined);
      return { answer_status: response.statusCode, error: null };
    } catch (error) {
      return { answer_status: null, error: timedOut ? `no answer within ${timeoutMs} ms` : describe(error) };
    } finally {
      clearTimeout(timer);
      this.inFlight.delete(controller);
    }
  }
}

function createEvent(order: SimOrder): PendingEvent {
  const id = `evt_${randomUUID()}`;
  const payload: WebhookEvent = {
    event_id: id,
    event: ORDER_UPDATED_EVENT,
    created_at: new Date().toISOString(),
    data: toPublicOrder(order),
  };
  const final =
    order.status === 'FAILED' ||
    order.status === 'REFUNDED' ||
    (order.status === 'SUCCESS' && order.serial_number !== null);
  return {
    id,
    order,
    status: order.status,
    final,
    body: Buffer.from(JSON.stringify(payload)),
    reordered: false,
    lost: false,
  };
}

function isDelivered(answer: Answer): boolean {
  return answer.answer_status !== null && answer.answer_status >= 200 && answer.answer_status < 300;
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return typeof code === 'string' && !error.message.includes(code)
    ? `${code}: ${error.message}${cause}`
    : `${error.message}${cause}`;
}
