import type { SqlExecutor } from './sql/executor.js';
import type { StoreContext } from './store-context.js';

/**
 * What one delivery attempt came to:
 * - `delivered`: the endpoint answered 2xx;
 * - `retrying`: any other answer, or none in time; the job tries again on the retry schedule;
 * - `gave_up`: the last attempt of the schedule failed too (`notifications retry` sends it again);
 * - `disabled`: the endpoint answered 410 Gone, so it was disabled;
 * - `skipped`: not sent: the endpoint is disabled, or the event left the feed (retention).
 */
export const DELIVERY_OUTCOMES = ['delivered', 'retrying', 'gave_up', 'disabled', 'skipped'] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];

/** One row of the delivery history. */
export interface NotifyDelivery {
  id: number;
  endpointId: number;
  /** The feed event (`webhook-id` is `evt_<seq>`). */
  seq: number;
  type: string;
  partnerRef: string | null;
  /** 1 for the first attempt of the job. */
  attempt: number;
  /** When the request was sent, ms. */
  requestedAt: number;
  /** The HTTP status of the answer; null when none came. */
  status: number | null;
  durationMs: number | null;
  /** Why it failed (no answer, time-out, connection refused); null otherwise. */
  error: string | null;
  outcome: DeliveryOutcome;
}

interface DeliveryRow {
  id: number;
  endpoint_id: number;
  seq: number;
  type: string;
  partner_ref: string | null;
  attempt: number;
  requested_at: number;
  status: number | null;
  duration_ms: number | null;
  error: string | null;
  outcome: DeliveryOutcome;
}

function toDelivery(row: DeliveryRow): NotifyDelivery {
  return {
    id: row.id,
    endpointId: row.endpoint_id,
    seq: row.seq,
    type: row.type,
    partnerRef: row.partner_ref,
    attempt: row.attempt,
    requestedAt: row.requested_at,
    status: row.status,
    durationMs: row.duration_ms,
    error: row.error,
    outcome: row.outcome,
  };
}

/** Outcomes after which an event is done with at its endpoint. */
export const SETTLED_OUTCOMES: readonly DeliveryOutcome[] = ['delivered', 'gave_up', 'disabled', 'skipped'];

export interface DeliveryFilter {
  /** Only attempts requested at or after this time, ms. */
  since?: number;
  endpointId?: number;
  /** Most rows; default 100. */
  limit?: number;
}

/** Given-up events one count reads at most (`h2h-sync status` shows `≥ n` past it). */
export const GAVE_UP_WINDOW = 100_000;

/** One row per attempt (the unique index notify_deliveries_attempt, migration 14). */
const INSERT = `INSERT INTO notify_deliveries
    (endpoint_id, seq, type, partner_ref, attempt, requested_at, status, duration_ms, error, outcome)
  VALUES (@endpoint_id, @seq, @type, @partner_ref, @attempt, @requested_at, @status, @duration_ms, @error, @outcome)
  ON CONFLICT (endpoint_id, seq, attempt, requested_at, outcome) DO NOTHING`;

/** Adds an attempt to the history, in the transaction `tx` of what it came to (notify-outbox.ts). */
export async function insertDelivery(tx: SqlExecutor, attempt: Omit<NotifyDelivery, 'id'>): Promise<void> {
  await tx.run(INSERT, toDeliveryRow(attempt));
}

/** One attempt as a row of `notify_deliveries`. */
function toDeliveryRow(attempt: Omit<NotifyDelivery, 'id'>) {
  return {
    endpoint_id: attempt.endpointId,
    seq: attempt.seq,
    type: attempt.type,
    partner_ref: attempt.partnerRef,
    attempt: attempt.attempt,
    requested_at: attempt.requestedAt,
    status: attempt.status,
    duration_ms: attempt.durationMs,
    error: attempt.error,
    outcome: attempt.outcome,
  };
}

/**
 * The delivery history: one row per attempt (and per notification not sent), written by the
 * outbox with what became of each (notify-outbox.ts). Never pruned: it is the record of what the
 * shop was sent.
 */
export class NotifyDeliveries {
  readonly #context: StoreContext;

  constructor(context: StoreContext) {
    this.#context = context;
  }

  /**
   * Adds an attempt to the history on its own (the outbox adds its attempts with what they came
   * to) and returns it with its id; an attempt recorded already is not added twice.
   */
  record(attempt: Omit<NotifyDelivery, 'id'>): Promise<NotifyDelivery> {
    return this.#context.db.write(async (tx) => {
      await insertDelivery(tx, attempt);
      const row = toDeliveryRow(attempt);
      const { id } = (await tx.get<{ id: number }>(
        `SELECT id FROM notify_deliveries
         WHERE endpoint_id = @endpoint_id AND seq = @seq AND attempt = @attempt
           AND requested_at = @requested_at AND outcome = @outcome
         ORDER BY id LIMIT 1`,
        row,
      ))!;
      return { id: Number(id), ...attempt };
    });
  }

  /** Attempts, newest first. */
  async history({ since = 0, endpointId, limit = 100 }: DeliveryFilter = {}): Promise<NotifyDelivery[]> {
    const rows = await this.#context.db.all<DeliveryRow>(
      `SELECT * FROM notify_deliveries
       WHERE requested_at >= @since AND (CAST(@endpoint AS BIGINT) IS NULL OR endpoint_id = @endpoint)
       ORDER BY id DESC LIMIT @limit`,
      { since, endpoint: endpointId ?? null, limit },
    );
    return rows.map(toDelivery);
  }

  /** Events whose last attempt gave up, by endpoint and seq. */
  async failed({ since = 0, endpointId, limit = 1000 }: DeliveryFilter = {}): Promise<NotifyDelivery[]> {
    // An event whose latest attempt at an endpoint gave up (a later retry or resend may have
    // delivered it since: then it is not failed any more).
    const rows = await this.#context.db.all<DeliveryRow>(
      `SELECT d.* FROM notify_deliveries d
       WHERE d.outcome = 'gave_up' AND d.requested_at >= @since
         AND (CAST(@endpoint AS BIGINT) IS NULL OR d.endpoint_id = @endpoint)
         AND d.id = (SELECT MAX(id) FROM notify_deliveries
                     WHERE endpoint_id = d.endpoint_id AND seq = d.seq)
       ORDER BY d.endpoint_id, d.seq LIMIT @limit`,
      { since, endpoint: endpointId ?? null, limit },
    );
    return rows.map(toDelivery);
  }

  /**
   * How many events the endpoint gave up on since `fromSeq` (their latest attempt), counted from
   * the index of given-up attempts (migration 13), up to `window` ({@link GAVE_UP_WINDOW}):
   * `capped` past it.
   */
  async gaveUp(
    endpointId: number,
    fromSeq: number,
    { window = GAVE_UP_WINDOW }: { window?: number } = {},
  ): Promise<{ count: number; capped: boolean }> {
    const row = await this.#context.db.get<{ n: number }>(
      `SELECT COUNT(*) AS n FROM (
         SELECT 1 FROM notify_deliveries d
         WHERE d.endpoint_id = @endpoint AND d.outcome = 'gave_up' AND d.seq > @fromSeq
           AND d.id = (SELECT MAX(id) FROM notify_deliveries
                       WHERE endpoint_id = d.endpoint_id AND seq = d.seq)
         LIMIT @limit) g`,
      { endpoint: endpointId, fromSeq, limit: window },
    );
    const count = Number(row?.n ?? 0);
    return { count, capped: count >= window };
  }
}
