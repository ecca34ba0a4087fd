import type { OrderRows } from './order-rows.js';
import type { Outcome, SqlExecutor, WriteOptions } from './sql/executor.js';

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

/** Outcomes after which an event is done with at its endpoint: the next of its order may go. */
export const SETTLED_OUTCOMES: readonly DeliveryOutcome[] = ['delivered', 'gave_up', 'disabled', 'skipped'];
const SETTLED = `(${SETTLED_OUTCOMES.map((o) => `'${o}'`).join(', ')})`;

/** How far an endpoint is behind the feed (`h2h-sync status`). */
export interface EndpointBacklog {
  /** Wanted events after its `fromSeq` not yet settled (queued, waiting, retrying, or not queued yet). */
  pending: number;
  /** Commit time of the oldest pending event, ms; null when none is pending. */
  oldestPendingAt: number | null;
  /** Pending events whose last attempt failed: being retried on the schedule. */
  failing: number;
  /** Events whose last attempt gave up (`notifications failed`). */
  gaveUp: number;
  /**
   * The read stopped at its bound ({@link BACKLOG_WINDOW} feed events, or as many given-up
   * events): the figures are lower bounds ("≥" in `status`).
   */
  capped: boolean;
}

/** Feed events (and given-up events) one endpoint's backlog reads at most. */
export const BACKLOG_WINDOW = 100_000;

export interface DeliveryFilter {
  /** Only attempts requested at or after this time, ms. */
  since?: number;
  endpointId?: number;
  /** Most rows; default 100. */
  limit?: number;
}

/**
 * One row per attempt (the unique index notify_deliveries_attempt): a second writer of the same
 * attempt inserts nothing, on PostgreSQL even while the first has not committed (it waits for it),
 * and then reads the first's row with {@link SAME_ATTEMPT}.
 */
const INSERT = `INSERT INTO notify_deliveries
    (endpoint_id, seq, type, partner_ref, attempt, requested_at, status, duration_ms, error, outcome)
  VALUES (@endpoint_id, @seq, @type, @partner_ref, @attempt, @requested_at, @status, @duration_ms, @error, @outcome)
  ON CONFLICT (endpoint_id, seq, attempt, requested_at, outcome) DO NOTHING
  RETURNING id`;
/** The row of this very attempt, if it is recorded already (see {@link NotifyDeliveries.record}). */
const SAME_ATTEMPT = `SELECT id FROM notify_deliveries
  WHERE endpoint_id = @endpoint_id AND seq = @seq AND attempt = @attempt
    AND requested_at = @requested_at AND outcome = @outcome
  ORDER BY id LIMIT 1`;
const LATEST =
  'SELECT * FROM notify_deliveries WHERE endpoint_id = @endpoint AND seq = @seq ORDER BY id DESC LIMIT 1';

/** The delivery history: one row per attempt, written by the notification worker. */
export class NotifyDeliveries {
  readonly #rows: OrderRows;

  constructor(rows: OrderRows) {
    this.#rows = rows;
  }

  /**
   * Records one attempt; returns it with its id. An attempt is recorded once: when a row of the
   * same endpoint, seq, attempt number, request time and outcome exists, that row is returned and
   * nothing is inserted. A delivery's record is written after its job has completed, by the
   * process that delivered it or, after a crash, by a sweep (src/notify/delivered-records.ts);
   * both may write the same attempt, and the history keeps one row.
   */
  record(attempt: Omit<NotifyDelivery, 'id'>): Promise<NotifyDelivery> {
    return this.#rows.db.write((tx) => this.#insert(tx, attempt));
  }

  /**
   * Records attempts in one transaction, each in its own savepoint: the notifier's group commit
   * (one fsync for the records of every notification in flight). Each attempt is recorded once,
   * as by {@link record}. Outcome per attempt; the call
   * rejects when the transaction as a whole fails.
   */
  recordBatch(
    attempts: ReadonlyArray<Omit<NotifyDelivery, 'id'>>,
    options: Pick<WriteOptions, 'lockTimeoutMs' | 'yieldingLock'> = {},
  ): Promise<Outcome<NotifyDelivery>[]> {
    return this.#rows.db.writeBatch(
      attempts.map((attempt) => (tx: SqlExecutor) => this.#insert(tx, attempt)),
      options,
    );
  }

  /**
   * Records `attempt` unless the event's latest attempt at the endpoint is settled or was made
   * after `after`; the check and the insert are one write, so two processes (a worker's `failed`
   * handler and another's start-up sweep) never both record it. Returns it, or undefined.
   *
   * On SQLite `BEGIN IMMEDIATE` serialises the two; on PostgreSQL (READ COMMITTED) both would
   * read no settled attempt and both insert, so the check first locks the endpoint's row: the
   * second waits for the first to commit and its check (a new statement) then sees its attempt.
   * `FOR UPDATE` also waits for a {@link record}/{@link recordBatch} of the endpoint in flight
   * (their foreign key check holds `FOR KEY SHARE` on the row), so their attempts are seen too.
   */
  recordUnlessSettled(
    attempt: Omit<NotifyDelivery, 'id'>,
    after: number,
  ): Promise<NotifyDelivery | undefined> {
    return this.#rows.db.write(async (tx) => {
      await tx.get(`SELECT id FROM notify_endpoints WHERE id = @endpoint ${tx.dialect.forUpdate}`, {
        endpoint: attempt.endpointId,
      });
      const row = await tx.get<DeliveryRow>(LATEST, { endpoint: attempt.endpointId, seq: attempt.seq });
      const latest = row ? toDelivery(row) : undefined;
      if (latest && (SETTLED_OUTCOMES.includes(latest.outcome) || latest.requestedAt > after))
        return undefined;
      return this.#insert(tx, attempt);
    });
  }

  /** Whether the event is done with at the endpoint (delivered, given up, or not to be sent). */
  async isSettled(endpointId: number, seq: number): Promise<boolean> {
    const row = await this.#rows.db.get<{ found: unknown }>(
      `SELECT EXISTS (SELECT 1 FROM notify_deliveries
                      WHERE endpoint_id = @endpointId AND seq = @seq AND outcome IN ${SETTLED}) AS found`,
      { endpointId, seq },
    );
    return Boolean(row?.found);
  }

  /** The latest attempt of the event at the endpoint; undefined when there is none. */
  async latest(endpointId: number, seq: number): Promise<NotifyDelivery | undefined> {
    const row = await this.#rows.db.get<DeliveryRow>(LATEST, { endpoint: endpointId, seq });
    return row ? toDelivery(row) : undefined;
  }

  /** Attempts, newest first. */
  async history({ since = 0, endpointId, limit = 100 }: DeliveryFilter = {}): Promise<NotifyDelivery[]> {
    const rows = await this.#rows.db.all<DeliveryRow>(
      `SELECT * FROM notify_deliveries
       WHERE requested_at >= @since AND (CAST(@endpoint AS BIGINT) IS NULL OR endpoint_id = @endpoint)
       ORDER BY id DESC LIMIT @limit`,
      { since, endpoint: endpointId ?? null, limit },
    );
    return rows.map(toDelivery);
  }

  /**
   * How far the endpoint is behind: its wanted event `types` after `fromSeq`, in a bounded read
   * (`h2h-sync status` must answer at once however long the feed is). Pending and failing are
   * counted among the newest `window` feed events after `fromSeq` (an index range of the feed,
   * newest first); when older events after `fromSeq` were not read, `capped` says so and the
   * counts and the oldest pending time are lower bounds (it is the newest events whose backlog
   * matters: a shop falling behind shows in them). Given-up events are counted over the whole
   * history, from the index of given-up attempts (migration 13), up to `window`.
   */
  async backlog(
    endpointId: number,
    fromSeq: number,
    types: readonly string[],
    { window = BACKLOG_WINDOW }: { window?: number } = {},
  ): Promise<EndpointBacklog> {
    if (types.length === 0)
      return { pending: 0, oldestPendingAt: null, failing: 0, gaveUp: 0, capped: false };
    // The type filter as a bound list (`IN (@t0, @t1, …)`): portable, unlike json_each.
    const typeParams = Object.fromEntries(types.map((type, i) => [`t${i}`, type]));
    const typeList = `(${types.map((_, i) => `@t${i}`).join(', ')})`;
    const last = await this.#rows.db.get<{ seq: number | null }>('SELECT MAX(seq) AS seq FROM feed_events');
    const from = Math.max(fromSeq, (last?.seq ?? 0) - window);
    const rows = await this.#rows.db.all<{ timestamp: number; latest: DeliveryOutcome | null }>(
      `SELECT f.timestamp,
              (SELECT d.outcome FROM notify_deliveries d
               WHERE d.endpoint_id = @endpoint AND d.seq = f.seq
               ORDER BY d.id DESC LIMIT 1) AS latest
       FROM feed_events f
       WHERE f.seq > @from AND f.type IN ${typeList}`,
      { endpoint: endpointId, from, ...typeParams },
    );
    let pending = 0;
    let failing = 0;
    let oldestPendingAt: number | null = null;
    for (const row of rows) {
      if (row.latest !== null && row.latest !== 'retrying') continue;
      pending += 1;
      if (row.latest === 'retrying') failing += 1;
      if (oldestPendingAt === null || row.timestamp < oldestPendingAt) oldestPendingAt = row.timestamp;
    }
    const gaveUp = await this.#rows.db.get<{ n: number }>(
      `SELECT COUNT(*) AS n FROM (
         SELECT 1 FROM notify_deliveries d
         WHERE d.endpoint_id = @endpoint AND d.outcome = 'gave_up' AND d.seq > @fromSeq
           AND d.type IN ${typeList}
           AND d.id = (SELECT MAX(id) FROM notify_deliveries
                       WHERE endpoint_id = d.endpoint_id AND seq = d.seq)
         LIMIT @limit) g`,
      { endpoint: endpointId, fromSeq, limit: window, ...typeParams },
    );
    const given = gaveUp?.n ?? 0;
    return { pending, oldestPendingAt, failing, gaveUp: given, capped: from > fromSeq || given >= window };
  }

  /** Events whose last attempt gave up, by endpoint and seq. */
  async failed({ since = 0, endpointId, limit = 1000 }: DeliveryFilter = {}): Promise<NotifyDelivery[]> {
    // An event whose latest attempt at an endpoint gave up (a later retry or replay may have
    // delivered it since: then it is not failed any more).
    const rows = await this.#rows.db.all<DeliveryRow>(
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

  async #insert(tx: SqlExecutor, attempt: Omit<NotifyDelivery, 'id'>): Promise<NotifyDelivery> {
    const row = toRow(attempt);
    const { id } =
      (await tx.get<{ id: number }>(INSERT, row)) ??
      (await tx.get<{ id: number }>(SAME_ATTEMPT, {
        endpoint_id: row.endpoint_id,
        seq: row.seq,
        attempt: row.attempt,
        requested_at: row.requested_at,
        outcome: row.outcome,
      }))!;
    return { id, ...attempt };
  }
}

function toRow(attempt: Omit<NotifyDelivery, 'id'>) {
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
