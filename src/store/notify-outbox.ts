import { randomUUID } from 'node:crypto';
import { type FeedEvent, type FeedRow, toFeedEvent } from './feed.js';
import { insertDelivery, type NotifyDelivery, SETTLED_OUTCOMES } from './notify-deliveries.js';
import type { Outcome, SqlExecutor } from './sql/executor.js';
import type { StoreContext } from './store-context.js';

/**
 * The notification outbox (docs/api.md, "Notifications"): one row per notification still to
 * deliver, per endpoint and feed event, with its next attempt, when it is due and the lease of
 * the process sending it. The store is the queue: a row is added from the change feed in the
 * transaction that moves the endpoint's cursor past its event, leased to one sender at a time,
 * and deleted with its history row once it is delivered, given up or not to be sent. Nothing
 * else holds a delivery's state, so a crash anywhere loses nothing: a row whose sender died is
 * taken again once its lease runs out (its POST may then reach the shop twice: receivers dedupe
 * on `webhook-id`).
 *
 * The one rule that keeps an order's events in sequence: while an order has rows for an endpoint,
 * exactly one of them has a due time (`next_at`), its earliest; the others wait with NULL, and
 * the row that leaves makes the next one due. Every write of an endpoint's rows (a look, a
 * settlement, a re-add) first locks the endpoint's row (PostgreSQL; on SQLite the write lock is
 * that already), so two processes' writes of one endpoint never interleave and each sees the
 * other's committed rows.
 */

/** A notification picked to be sent: its row, and the event it carries. */
export interface OutboxItem {
  endpointId: number;
  seq: number;
  /** This attempt's number: 1 for the first. */
  attempt: number;
  /** Names this pick: only its holder changes the row ({@link NotifyOutbox.settleBatch}). */
  lease: string;
  /** The feed event; undefined once it left the feed (its retention). */
  event: FeedEvent | undefined;
}

/** What became of a picked notification, with the record of the attempt for the history. */
export type Settlement = {
  item: Pick<OutboxItem, 'endpointId' | 'seq' | 'lease'>;
  record: Omit<NotifyDelivery, 'id'>;
} & (
  | { outcome: 'delivered' | 'gave_up' | 'skipped' }
  /** Tried again at `nextAt` as attempt `item.attempt + 1`. */
  | { outcome: 'retrying'; nextAt: number }
  /** The endpoint answered 410 Gone: it is disabled and its other rows are dropped (`skipped`). */
  | { outcome: 'disabled'; reason: string }
);

/** How far an endpoint is behind (`h2h-sync status`). */
export interface OutboxBacklog {
  /** Notifications not delivered yet: in the outbox, or after its cursor in the feed. */
  pending: number;
  /** Commit time of the oldest of them, ms; null when none. */
  oldestPendingAt: number | null;
  /** Of those, the ones whose last attempt failed: waiting for their next on the schedule. */
  failing: number;
}

/**
 * A row of endpoint `@endpoint` due now: its time came (a row waiting for an earlier one of its
 * order has none) and no live lease holds it. Read through the index notify_outbox_due, so a
 * long backlog behind its orders' first rows costs nothing to pick past.
 */
const DUE = `o.endpoint_id = @endpoint AND o.next_at <= @now
  AND (o.leased_until IS NULL OR o.leased_until <= @now)`;

/**
 * The `next_at` of a notification added for endpoint `@id` from feed event `f`: NULL (waiting)
 * when its order has a notification in the outbox already or an earlier one among those added
 * with it; otherwise `@at`. An event of no order waits for nothing.
 */
const NEXT_AT = `CASE WHEN f.partner_ref IS NOT NULL AND (
    ROW_NUMBER() OVER (PARTITION BY f.partner_ref ORDER BY f.seq) > 1
    OR EXISTS (SELECT 1 FROM notify_outbox w WHERE w.endpoint_id = @id AND w.partner_ref = f.partner_ref))
  THEN NULL ELSE CAST(@at AS BIGINT) END`;

/** A leased row, before its event is read. */
type Leased = Omit<OutboxItem, 'event'>;

const SETTLED = `(${SETTLED_OUTCOMES.map((o) => `'${o}'`).join(', ')})`;

/** The bound list `(@t0, @t1, …)` of event types, and its parameters: portable, unlike json_each. */
function typeList(types: readonly string[]): { sql: string; params: Record<string, string> } {
  return {
    sql: `(${types.map((_, i) => `@t${i}`).join(', ')})`,
    params: Object.fromEntries(types.map((type, i) => [`t${i}`, type])),
  };
}

export class NotifyOutbox {
  readonly #context: StoreContext;

  constructor(context: StoreContext) {
    this.#context = context;
  }

  /**
   * One look of a notifier, in ONE write transaction (one fsync, and one take of SQLite's write
   * lock, which the order writers need too): writes what became of the deliveries that finished
   * (`settled`, as {@link settleBatch} does), adds each endpoint's new events from the feed
   * ({@link fill}), then leases up to `room` due notifications of each endpoint ({@link pick}),
   * which sees the settled ones gone (an order's next event may go). Reads first and writes
   * nothing when there is nothing to settle, add or lease. `more`: the feed held more new events
   * than one look adds.
   */
  async turn({
    settled,
    endpoints,
    leaseMs,
  }: {
    settled: readonly Settlement[];
    endpoints: ReadonlyArray<{ id: number; cursor: number; types: readonly string[]; room: number }>;
    leaseMs: number;
  }): Promise<{ picked: OutboxItem[]; added: number; more: boolean }> {
    const work: Array<{ id: number; cursor: number; types: readonly string[]; room: number }> = [];
    for (const endpoint of endpoints) {
      if (
        (await this.#hasNewEvents(endpoint.cursor)) ||
        (endpoint.room > 0 && (await this.#hasDue(endpoint.id)))
      )
        work.push(endpoint);
    }
    if (settled.length === 0 && work.length === 0) return { picked: [], added: 0, more: false };
    const done = await this.#context.db.write(async (tx) => {
      await lockEndpoints(tx, [...settled.map((s) => s.item.endpointId), ...endpoints.map((e) => e.id)]);
      for (const settlement of settled) await this.#settle(tx, settlement);
      let added = 0;
      let more = false;
      const picked: Leased[] = [];
      for (const endpoint of work) {
        const filled = await this.#fill(tx, endpoint, endpoint.types);
        added += filled.added;
        more ||= filled.more;
      }
      for (const endpoint of endpoints) {
        if (endpoint.room > 0) picked.push(...(await this.#pick(tx, endpoint.id, endpoint.room, leaseMs)));
      }
      return { added, more, picked };
    });
    return { ...done, picked: await this.#withEvents(done.picked) };
  }

  /**
   * Adds the endpoint's wanted events (`types`) after its cursor, up to `page` feed events, and
   * moves its cursor past them, in one transaction: the feed and the outbox never disagree, so
   * no event is lost between them and none is added twice. An event already settled at the
   * endpoint (an upgrade's rewound cursor) is not added again. Nothing is written while the feed
   * holds nothing after the cursor. Returns how many rows it added, the cursor after them
   * (`upTo`; undefined when it did not move) and whether more events wait after it.
   */
  async fill(
    endpoint: { id: number; cursor: number },
    types: readonly string[],
    { page = 500 }: { page?: number } = {},
  ): Promise<{ added: number; upTo?: number; more: boolean }> {
    // A read first, outside a transaction: a write would take the lock the order writers need.
    if (!(await this.#hasNewEvents(endpoint.cursor))) return { added: 0, more: false };
    return this.#context.db.write((tx) => this.#fill(tx, endpoint, types, page));
  }

  /**
   * Leases up to `limit` of the endpoint's notifications due now, the longest due first, for
   * `leaseMs`: a row under another live lease is left to its holder (`SKIP LOCKED` on
   * PostgreSQL), and one waiting for an earlier notification of its order is not due, so an
   * order's events reach an endpoint one after another. Nothing is written while nothing is due.
   */
  async pick(endpointId: number, limit: number, leaseMs: number): Promise<OutboxItem[]> {
    if (!(await this.#hasDue(endpointId))) return [];
    const leased = await this.#context.db.write((tx) => this.#pick(tx, endpointId, limit, leaseMs));
    return this.#withEvents(leased);
  }

  /**
   * Writes what became of picked notifications, each with its history row, in one transaction
   * (the notifier's group commit: one fsync for the deliveries settled together), each in its own
   * savepoint: delivered, given up or skipped → the row is deleted; retrying → the next attempt,
   * due at `nextAt`; disabled (410) → the endpoint is disabled and its rows dropped, each
   * recorded `skipped`. A settlement whose lease is no longer its row's (it ran out and another
   * process took the row, or the row is gone) only adds its history row.
   */
  settleBatch(settlements: readonly Settlement[]): Promise<Outcome<void>[]> {
    // In endpoint order, as a look locks them: two writers never wait for each other in a circle.
    const ordered = [...settlements].sort((a, b) => a.item.endpointId - b.item.endpointId);
    return this.#context.db.writeBatch(
      ordered.map((s) => async (tx: SqlExecutor) => {
        await lockEndpoints(tx, [s.item.endpointId]);
        await this.#settle(tx, s);
      }),
    );
  }

  /**
   * Adds the events `seqs` for the endpoint, if it is enabled, due at `nextAt` (default now; or
   * behind its order's rows still in the outbox) as attempt `attempt`
   * (default 1: a fresh retry schedule): `notifications retry` and `resend`, and the jobs of the
   * queue before the outbox (src/queue/old-notify-queue.ts). An event that is in the outbox already stays as it
   * is. Returns how many rows it added.
   */
  async enqueue(
    endpointId: number,
    seqs: readonly number[],
    { attempt = 1, nextAt }: { attempt?: number; nextAt?: number } = {},
  ): Promise<number> {
    if (seqs.length === 0) return 0;
    return this.#context.db.write(async (tx) => {
      const endpoint = await tx.get<{ cursor: number; disabled_at: number | null }>(
        `SELECT cursor, disabled_at FROM notify_endpoints WHERE id = @id ${tx.dialect.forUpdate}`,
        { id: endpointId },
      );
      if (!endpoint || endpoint.disabled_at !== null) return 0;
      // Only events the endpoint's cursor has passed: a later one is added by the next look, in
      // its order's place.
      const { changes } = await tx.run(
        `INSERT INTO notify_outbox (endpoint_id, seq, partner_ref, attempt, next_at)
         SELECT @id, f.seq, f.partner_ref, @attempt, ${NEXT_AT} FROM feed_events f
         WHERE f.seq IN (${seqs.map((_, i) => `@s${i}`).join(', ')}) AND f.seq <= @cursor
         ON CONFLICT DO NOTHING`,
        {
          id: endpointId,
          cursor: endpoint.cursor,
          attempt,
          at: nextAt ?? this.#context.now(),
          ...Object.fromEntries(seqs.map((seq, i) => [`s${i}`, seq])),
        },
      );
      return changes;
    });
  }

  /**
   * How far the endpoint is behind: its rows, and its wanted events (`types`) after its cursor
   * that no process has added yet (a worker that is not running).
   */
  async backlog(endpoint: { id: number; cursor: number }, types: readonly string[]): Promise<OutboxBacklog> {
    const { db } = this.#context;
    const queued = await db.get<{ n: number; failing: number; oldest: number | null }>(
      `SELECT COUNT(*) AS n, COALESCE(SUM(CASE WHEN o.attempt > 1 THEN 1 ELSE 0 END), 0) AS failing,
              MIN(f.timestamp) AS oldest
       FROM notify_outbox o LEFT JOIN feed_events f ON f.seq = o.seq
       WHERE o.endpoint_id = @id`,
      { id: endpoint.id },
    );
    const wanted = typeList(types);
    const unfilled =
      types.length === 0
        ? undefined
        : await db.get<{ n: number; oldest: number | null }>(
            `SELECT COUNT(*) AS n, MIN(timestamp) AS oldest FROM feed_events
             WHERE seq > @cursor AND type IN ${wanted.sql}`,
            { cursor: endpoint.cursor, ...wanted.params },
          );
    const oldest = [queued?.oldest, unfilled?.oldest].filter(
      (t): t is number => t !== null && t !== undefined,
    );
    return {
      pending: Number(queued?.n ?? 0) + Number(unfilled?.n ?? 0),
      oldestPendingAt: oldest.length === 0 ? null : Math.min(...oldest.map(Number)),
      failing: Number(queued?.failing ?? 0),
    };
  }

  #hasNewEvents(cursor: number): Promise<boolean> {
    return this.#context.db
      .get('SELECT 1 AS found FROM feed_events WHERE seq > @cursor LIMIT 1', { cursor })
      .then(Boolean);
  }

  #hasDue(endpointId: number): Promise<boolean> {
    return this.#context.db
      .get(`SELECT 1 AS found FROM notify_outbox o WHERE ${DUE} LIMIT 1`, {
        now: this.#context.now(),
        endpoint: endpointId,
      })
      .then(Boolean);
  }

  async #fill(
    tx: SqlExecutor,
    endpoint: { id: number },
    types: readonly string[],
    page = 500,
  ): Promise<{ added: number; upTo?: number; more: boolean }> {
    const row = await tx.get<{ cursor: number; disabled_at: number | null }>(
      `SELECT cursor, disabled_at FROM notify_endpoints WHERE id = @id ${tx.dialect.forUpdate}`,
      { id: endpoint.id },
    );
    if (!row || row.disabled_at !== null) return { added: 0, more: false };
    const span = await tx.get<{ upTo: number | null; n: number }>(
      `SELECT MAX(seq) AS "upTo", COUNT(*) AS n FROM (
         SELECT seq FROM feed_events WHERE seq > @cursor ORDER BY seq LIMIT @page) AS page`,
      { cursor: row.cursor, page },
    );
    if (!span || span.upTo === null) return { added: 0, more: false };
    let added = 0;
    if (types.length > 0) {
      const wanted = typeList(types);
      ({ changes: added } = await tx.run(
        `INSERT INTO notify_outbox (endpoint_id, seq, partner_ref, attempt, next_at)
         SELECT @id, f.seq, f.partner_ref, 1, ${NEXT_AT} FROM feed_events f
         WHERE f.seq > @cursor AND f.seq <= @upTo AND f.type IN ${wanted.sql}
           AND NOT EXISTS (SELECT 1 FROM notify_deliveries d
                           WHERE d.endpoint_id = @id AND d.seq = f.seq AND d.outcome IN ${SETTLED})
         ON CONFLICT DO NOTHING`,
        { id: endpoint.id, cursor: row.cursor, upTo: span.upTo, at: this.#context.now(), ...wanted.params },
      ));
    }
    await tx.run('UPDATE notify_endpoints SET cursor = @upTo WHERE id = @id', {
      id: endpoint.id,
      upTo: span.upTo,
    });
    return { added, upTo: Number(span.upTo), more: Number(span.n) >= page };
  }

  async #pick(tx: SqlExecutor, endpointId: number, limit: number, leaseMs: number): Promise<Leased[]> {
    const now = this.#context.now();
    const rows = await tx.all<{ endpoint_id: number; seq: number; attempt: number }>(
      `SELECT o.endpoint_id, o.seq, o.attempt FROM notify_outbox o WHERE ${DUE}
       ORDER BY o.next_at, o.seq LIMIT @limit ${tx.dialect.skipLocked}`,
      { now, limit, endpoint: endpointId },
    );
    const lease = randomUUID();
    for (const row of rows) {
      await tx.run(
        `UPDATE notify_outbox SET leased_until = @until, lease_token = @lease
         WHERE endpoint_id = @endpoint_id AND seq = @seq`,
        { ...row, until: now + leaseMs, lease },
      );
    }
    return rows.map((row) => ({ endpointId: row.endpoint_id, seq: row.seq, attempt: row.attempt, lease }));
  }

  /** The leased rows with their feed events, read after the lease committed. */
  async #withEvents(leased: readonly Leased[]): Promise<OutboxItem[]> {
    if (leased.length === 0) return [];
    const seqs = [...new Set(leased.map((p) => p.seq))];
    const rows = await this.#context.db.all<FeedRow>(
      `SELECT * FROM feed_events WHERE seq IN (${seqs.map((_, i) => `@s${i}`).join(', ')})`,
      Object.fromEntries(seqs.map((seq, i) => [`s${i}`, seq])),
    );
    const events = new Map(rows.map((row) => [Number(row.seq), toFeedEvent(row)]));
    return leased.map((p) => ({ ...p, event: events.get(p.seq) }));
  }

  async #settle(tx: SqlExecutor, settlement: Settlement): Promise<void> {
    const { item, record } = settlement;
    const key = { endpoint: item.endpointId, seq: item.seq };
    const row = await tx.get<{ lease_token: string | null; partner_ref: string | null }>(
      `SELECT lease_token, partner_ref FROM notify_outbox WHERE endpoint_id = @endpoint AND seq = @seq ${tx.dialect.forUpdate}`,
      key,
    );
    await insertDelivery(tx, record);
    if (row?.lease_token !== item.lease) return;
    if (settlement.outcome === 'retrying') {
      await tx.run(
        `UPDATE notify_outbox SET attempt = attempt + 1, next_at = @nextAt, leased_until = NULL, lease_token = NULL
         WHERE endpoint_id = @endpoint AND seq = @seq`,
        { ...key, nextAt: settlement.nextAt },
      );
      return;
    }
    if (settlement.outcome === 'disabled') {
      await tx.run(
        `UPDATE notify_endpoints SET disabled_at = @now, disabled_reason = @reason
         WHERE id = @endpoint AND disabled_at IS NULL`,
        { endpoint: item.endpointId, now: this.#context.now(), reason: settlement.reason },
      );
      await dropEndpointRows(tx, item.endpointId, this.#context.now(), { except: item.seq });
    }
    await tx.run('DELETE FROM notify_outbox WHERE endpoint_id = @endpoint AND seq = @seq', key);
    if (row.partner_ref !== null) {
      // Its order's next notification is due now (unless one of the order is due or sent already).
      // The index named for SQLite: without ANALYZE figures its planner read the NOT EXISTS through
      // the primary key, every row of the endpoint, so each settlement cost more as a backlog grew.
      await tx.run(
        `UPDATE notify_outbox SET next_at = @now
         WHERE endpoint_id = @endpoint AND partner_ref = @ref AND next_at IS NULL
           AND seq = (SELECT MIN(seq) FROM notify_outbox m WHERE m.endpoint_id = @endpoint AND m.partner_ref = @ref)
           AND NOT EXISTS (SELECT 1 FROM notify_outbox r ${tx.dialect.indexedBy('notify_outbox_order')}
                           WHERE r.endpoint_id = @endpoint AND r.partner_ref = @ref AND r.next_at IS NOT NULL)`,
        { endpoint: item.endpointId, ref: row.partner_ref, now: this.#context.now() },
      );
    }
  }
}

/** Locks the rows of `ids` in `notify_endpoints`, in ascending order (PostgreSQL; see the top). */
async function lockEndpoints(tx: SqlExecutor, ids: readonly number[]): Promise<void> {
  const unique = [...new Set(ids)].sort((a, b) => a - b);
  if (unique.length === 0 || tx.dialect.forUpdate === '') return;
  await tx.all(
    `SELECT id FROM notify_endpoints WHERE id IN (${unique.map((_, i) => `@e${i}`).join(', ')})
     ORDER BY id ${tx.dialect.forUpdate}`,
    Object.fromEntries(unique.map((id, i) => [`e${i}`, id])),
  );
}

/**
 * Drops every outbox row of a disabled endpoint, each recorded `skipped` in the history (but
 * `except`, whose own record its caller writes), in the caller's transaction.
 */
export async function dropEndpointRows(
  tx: SqlExecutor,
  endpointId: number,
  now: number,
  { except }: { except?: number } = {},
): Promise<void> {
  const params = { endpoint: endpointId, now, except: except ?? -1 };
  await tx.run(
    `INSERT INTO notify_deliveries
       (endpoint_id, seq, type, partner_ref, attempt, requested_at, status, duration_ms, error, outcome)
     SELECT o.endpoint_id, o.seq, COALESCE(f.type, 'unknown'), o.partner_ref, o.attempt, @now, NULL, NULL,
            'the endpoint is disabled', 'skipped'
     FROM notify_outbox o LEFT JOIN feed_events f ON f.seq = o.seq
     WHERE o.endpoint_id = @endpoint AND o.seq <> @except
     ON CONFLICT (endpoint_id, seq, attempt, requested_at, outcome) DO NOTHING`,
    params,
  );
  await tx.run('DELETE FROM notify_outbox WHERE endpoint_id = @endpoint AND seq <> @except', params);
}
