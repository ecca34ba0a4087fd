import { parseAttempts } from '../domain/attempt-records.js';
import { pollBaseOf } from '../domain/poll-rules.js';
import { type PublicOrder, toPublicOrder } from '../domain/public-order.js';
import { isKnownStatus } from '../domain/state-machine.js';
import {
  type LocalOrder,
  type OrderEvent,
  type OrderEventRow,
  type OrderRow,
  SUBMISSION_STATES,
  type SubmissionState,
  toLocalOrder,
  toOrderEvent,
} from './local-order.js';
import { checkedAtSql } from './order-claims.js';
import type { SqlExecutor } from './sql/executor.js';
import type { StoreContext } from './store-context.js';

/** The column a status filter reads: a status of decisions.md, else a submission state, else the upstream's string. */
function statusColumn(status: string): 'status' | 'submission_state' | 'upstream_status' {
  if (isKnownStatus(status)) return 'status';
  return (SUBMISSION_STATES as readonly string[]).includes(status) ? 'submission_state' : 'upstream_status';
}

/** The filters and position of a page of {@link OrderQueries.pageOrders}. */
export interface OrderPageInput {
  status?: string;
  /** The status string the upstream last sent, whatever it is. */
  upstreamStatus?: string;
  createdFrom?: number;
  createdTo?: number;
  beforeId?: number;
  limit: number;
}

/**
 * The statement of a page of orders, newest first: each filter on a column whose index
 * ends in the id (orders_status, orders_submission_state, orders_upstream_status: schema 30), so
 * a filter that matches few orders reads those only, never the orders between them.
 */
export function orderPageQuery(input: OrderPageInput): {
  sql: string;
  params: Record<string, string | number>;
} {
  const where: string[] = [];
  const params: Record<string, string | number> = { limit: input.limit + 1 };
  if (input.status !== undefined) {
    where.push(`${statusColumn(input.status)} = @status`);
    params.status = input.status;
  }
  if (input.upstreamStatus !== undefined) {
    where.push('upstream_status = @upstreamStatus');
    params.upstreamStatus = input.upstreamStatus;
  }
  if (input.createdFrom !== undefined) {
    where.push('local_created_at >= @createdFrom');
    params.createdFrom = input.createdFrom;
  }
  if (input.createdTo !== undefined) {
    where.push('local_created_at < @createdTo');
    params.createdTo = input.createdTo;
  }
  if (input.beforeId !== undefined) {
    where.push('id < @beforeId');
    params.beforeId = input.beforeId;
  }
  const sql = `SELECT * FROM orders ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT @limit`;
  return { sql, params };
}

/** Default page size of {@link OrderQueries.listOrders}. */
export const DEFAULT_LIST_LIMIT = 50;

export interface ListOrdersInput {
  /**
   * An order status (`PENDING`, `SUCCESS` …) matches the last applied status; a submission state
   * (`pending`, `accepted`, `rejected`, `unknown`) matches the create outcome; any other string
   * matches the raw upstream status (for example a status outside decisions.md's table).
   */
  status?: string;
  /** Default: {@link DEFAULT_LIST_LIMIT}. */
  limit?: number;
}

/** Figures for `h2h-sync status`. */
export interface OrderCounts {
  total: number;
  /** Orders by last applied status, or by raw upstream status when that is outside the table. */
  byStatus: Record<string, number>;
  bySubmissionState: Record<SubmissionState, number>;
  /** Orders not settled yet, that is orders with a next poll time. */
  open: number;
  /** Local creation time (ms) of the oldest open order, or null. */
  oldestOpenLocalCreatedAt: number | null;
  dueForPoll: number;
  /**
   * Orders marked stuck that are still incomplete: open ones (still polled at the longest
   * interval), and SUCCESS orders still without their serial (no longer polled).
   */
  stuck: number;
}

/** The figures of {@link OrderCounts} that `order_counts` holds ({@link OrderQueries.countsOnly}). */
export type StoredCounts = Omit<OrderCounts, 'oldestOpenLocalCreatedAt' | 'dueForPoll'>;

/** The period of {@link OrderQueries.auditCoverage}: checked within the last day. */
export const AUDIT_COVERAGE_PERIOD_MS = 86_400_000;

/** How much of the audit window the upstream was asked about lately (`h2h-sync status`). */
export interface AuditCoverage {
  /** SUCCESS orders that became final within the window. */
  successOrders: number;
  /** Of those, orders checked within the last day: read from the upstream, or final since then. */
  checkedLastDay: number;
}

/** The order store's reads, for the CLI, the metrics and the reconciler. Never writes. */
export class OrderQueries {
  readonly #context: StoreContext;

  constructor(context: StoreContext) {
    this.#context = context;
  }

  /** Events of every order applied after event `afterId`, in the order they were applied. */
  async eventsAfter(afterId: number, limit = 500): Promise<OrderEvent[]> {
    const rows = await this.#context.db.all<OrderEventRow>(
      'SELECT * FROM order_events WHERE id > @afterId ORDER BY id LIMIT @limit',
      { afterId, limit },
    );
    return rows.map(toOrderEvent);
  }

  /** The id of the last event applied (0 when none was): where a follower starts. */
  async lastEventId(): Promise<number> {
    return (
      (await this.#context.db.get<{ id: number | null }>('SELECT MAX(id) AS id FROM order_events'))?.id ?? 0
    );
  }

  /** The order with this partner_ref, else with this invoice number. */
  async getOrder(ref: string): Promise<LocalOrder | undefined> {
    const row = await this.#context.find(this.#context.db, ref, ref);
    return row && toLocalOrder(row);
  }

  /** The public representation of the order with this partner_ref, else invoice number (docs/api.md). */
  async getPublicOrder(ref: string): Promise<PublicOrder | undefined> {
    const row = await this.#context.find(this.#context.db, ref, ref);
    return row && toPublicOrder(row);
  }

  /**
   * A page of orders in their public representation, newest first (by row id, so a page never
   * shifts when orders are added), for the API's cursor pagination: those with an id below
   * `beforeId`, `status` as in {@link listOrders}, written locally within
   * [`createdFrom`, `createdTo`) (ms). Returns one row more than `limit` when there is more.
   */
  async pageOrders(input: OrderPageInput): Promise<Array<{ id: number; order: PublicOrder }>> {
    const { sql, params } = orderPageQuery(input);
    const rows = await this.#context.db.all<OrderRow>(sql, params);
    return rows.map((row) => ({ id: row.id, order: toPublicOrder(row) }));
  }

  /** How many orders wait in the submission queue (submission `queued`). */
  countQueued(): Promise<number> {
    return countQueued(this.#context.db);
  }

  /** How many orders wait in `upstream`'s submission queue (its pump's; the routing reads it). */
  countQueuedOn(upstream: string): Promise<number> {
    return countQueued(this.#context.db, upstream);
  }

  /**
   * `upstream`'s submission queue (every upstream's when not given): how many orders wait to be
   * sent (submission `queued`), and the local creation (ms) of the oldest, null when none waits.
   */
  async submissionBacklog(upstream?: string): Promise<{ queued: number; oldestQueuedAt: number | null }> {
    const { db } = this.#context;
    const row = await db.get<{ n: number; oldest: number | null }>(
      `SELECT COUNT(*) AS n, MIN(local_created_at) AS oldest FROM orders ${db.dialect.indexedBy('orders_queued')}
       WHERE submission_state = 'queued'${upstream === undefined ? '' : ' AND upstream = @upstream'}`,
      upstream === undefined ? {} : { upstream },
    );
    return {
      queued: Number(row?.n ?? 0),
      oldestQueuedAt: row?.oldest === null || row?.oldest === undefined ? null : Number(row.oldest),
    };
  }

  /**
   * When the history retention (H2H_HISTORY_RETENTION_D) last deleted the events and notification
   * records of the order `partnerRef` (ms), or null when it never did: its history starts after it.
   */
  async historyPrunedAt(partnerRef: string): Promise<number | null> {
    const row = await this.#context.db.get<{ at: number | null }>(
      'SELECT history_pruned_at AS at FROM orders WHERE partner_ref = @partnerRef',
      { partnerRef },
    );
    return row?.at == null ? null : Number(row.at);
  }

  /** The order with exactly this partner_ref (never one whose invoice number it is). */
  async getOrderByPartnerRef(partnerRef: string): Promise<LocalOrder | undefined> {
    const row = await this.#context.find(this.#context.db, partnerRef, null);
    return row && toLocalOrder(row);
  }

  /** The public representation of the order with exactly this partner_ref. */
  async getPublicOrderByPartnerRef(partnerRef: string): Promise<PublicOrder | undefined> {
    const row = await this.#context.find(this.#context.db, partnerRef, null);
    return row && toPublicOrder(row);
  }

  /** Orders, newest local creation first. See {@link ListOrdersInput.status} for the filter. */
  async listOrders(input: ListOrdersInput = {}): Promise<LocalOrder[]> {
    return (await this.#listRows(input)).map(toLocalOrder);
  }

  /** {@link listOrders} in the public representation (`order list --json`). */
  async listPublicOrders(input: ListOrdersInput = {}): Promise<PublicOrder[]> {
    return (await this.#listRows(input)).map(toPublicOrder);
  }

  async #listRows({ status, limit = DEFAULT_LIST_LIMIT }: ListOrdersInput): Promise<OrderRow[]> {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`limit must be a whole number ≥ 1, got ${limit}`);
    }
    const { db } = this.#context;
    const order = 'ORDER BY local_created_at DESC, id DESC LIMIT @limit';
    if (status === undefined) return db.all<OrderRow>(`SELECT * FROM orders ${order}`, { limit });
    const column = statusColumn(status);
    // The waiting orders (queued, blocked: `status` shows the newest blocked one) from their own
    // index, orders_waiting, whose condition the query must repeat for SQLite to use it: else
    // every order the store holds is read to find none or a few.
    const waiting = status === 'queued' || status === 'blocked';
    return db.all<OrderRow>(
      `SELECT * FROM orders ${waiting ? db.dialect.indexedBy('orders_waiting') : ''} WHERE ${column} = @status
       ${waiting ? "AND submission_state IN ('queued', 'blocked')" : ''} ${order}`,
      { status, limit },
    );
  }

  /**
   * How long `upstream`'s last `limit` SUCCESS orders of product `code` took from their first
   * create to their final status, in ms, newest first (the `fastest` routing policy; the index
   * `orders_completion`).
   */
  async completionTimes(upstream: string, code: string, limit = 20): Promise<number[]> {
    const rows = await this.#context.db.all<{ ms: number }>(
      `SELECT final_at - first_sent_at AS ms FROM orders
       WHERE upstream = @upstream AND product_code = @code AND status = 'SUCCESS'
         AND final_at IS NOT NULL AND first_sent_at IS NOT NULL
       ORDER BY final_at DESC LIMIT @limit`,
      { upstream, code, limit },
    );
    return rows.map((r) => Number(r.ms));
  }

  /**
   * How many of `upstream`'s orders are open past their product's own learned outlier time
   * (`poll_plans.outlier_ms`: with 95 % confidence longer than all but one in a thousand of the
   * product's orders take to a final state; docs/reconciler.md, "The outlier time"), counted from
   * the order's creation as the reconciler counts it (`pollBaseOf`): accepted upstream, no final
   * state yet. Products whose pace is not learned yet have no outlier time and count none.
   */
  async countOverdue(upstream: string, now: number = this.#context.now()): Promise<number> {
    // The SQL bound is on the local creation, which is never after the base: it keeps every
    // candidate, and only the candidates are read.
    const rows = await this.#context.db.all<{
      local_created_at: number;
      created_at: string | null;
      outlier_ms: number;
    }>(
      `SELECT o.local_created_at, o.created_at, p.outlier_ms
       FROM orders o JOIN poll_plans p ON p.upstream = o.upstream AND p.product_code = o.product_code
       WHERE o.upstream = @upstream AND o.next_poll_at IS NOT NULL AND o.final_at IS NULL
         AND o.submission_state = 'accepted' AND p.outlier_ms IS NOT NULL
         AND o.local_created_at < @now - p.outlier_ms`,
      { upstream, now },
    );
    return rows.filter(
      (row) =>
        now - pollBaseOf({ ...row, local_created_at: Number(row.local_created_at) }, now) >
        Number(row.outlier_ms),
    ).length;
  }

  /**
   * The audit trail of an order (by partner_ref, the shop's ref or invoice number), oldest first:
   * every attempt's events, each under its own partner_ref.
   */
  async listEvents(ref: string): Promise<OrderEvent[]> {
    const { db } = this.#context;
    const row = await this.#context.find(db, ref, ref);
    if (!row) return [];
    const refs = [...parseAttempts(row.attempts).map((a) => a.partner_ref), row.partner_ref];
    const params = Object.fromEntries(refs.map((r, i) => [`ref${i}`, r]));
    const events = await db.all<OrderEventRow>(
      `SELECT * FROM order_events WHERE partner_ref IN (${refs.map((_, i) => `@ref${i}`).join(', ')}) ORDER BY id`,
      params,
    );
    return events.map(toOrderEvent);
  }

  /**
   * The audit's coverage: of the SUCCESS orders that became final within `windowMs` before
   * `now`, how many were checked with the upstream within the last day (their last poll or
   * audit read, or their becoming final, is that recent: {@link CHECKED_AT_SQL}). Reads the
   * window's SUCCESS orders from the index `orders_success_final` (schema 27), which holds every
   * column it needs: its cost grows with the orders of the window, never with older ones.
   */
  async auditCoverage(
    windowMs: number,
    now: number = this.#context.now(),
    upstream?: string,
  ): Promise<AuditCoverage> {
    const { db } = this.#context;
    const row = await db.get<{ successOrders: number; checkedLastDay: number }>(
      `SELECT COUNT(*) AS "successOrders",
              COALESCE(SUM(CASE WHEN ${checkedAtSql(db)} > @checkedSince THEN 1 ELSE 0 END), 0) AS "checkedLastDay"
       FROM orders ${db.dialect.indexedBy('orders_success_final')} WHERE status = 'SUCCESS' AND final_at >= @finalSince
       ${upstream === undefined ? '' : 'AND upstream = @upstream'}`,
      {
        checkedSince: now - AUDIT_COVERAGE_PERIOD_MS,
        finalSince: now - windowMs,
        ...(upstream === undefined ? {} : { upstream }),
      },
    );
    return { successOrders: row?.successOrders ?? 0, checkedLastDay: row?.checkedLastDay ?? 0 };
  }

  /**
   * The upstreams the store has held orders of, by name: `order_counts`' rows (a few), which stay
   * when their orders moved on (an order failed over to another upstream).
   */
  async upstreamsWithOrders(): Promise<string[]> {
    const rows = await this.#context.db.all<{ upstream: string }>(
      'SELECT DISTINCT upstream FROM order_counts ORDER BY upstream',
    );
    return rows.map((row) => row.upstream);
  }

  /**
   * Whether the store knows upstream `name`: it held orders of it ({@link upstreamsWithOrders}),
   * or it said an event of one (`order_events_upstream`: one index seek), which a store copied by
   * `store migrate` (whose counts are of the orders' last upstream) still shows.
   */
  async knowsUpstream(name: string): Promise<boolean> {
    if ((await this.upstreamsWithOrders()).includes(name)) return true;
    const event = await this.#context.db.get<{ one: number }>(
      'SELECT 1 AS one FROM order_events WHERE upstream = @name LIMIT 1',
      { name },
    );
    return event !== undefined;
  }

  /**
   * Counts for `h2h-sync status`: of every order, or of one upstream's (`upstream`: the
   * reconciler of that upstream, `status` per upstream).
   */
  async countByStatus(now: number = this.#context.now(), upstream?: string): Promise<OrderCounts> {
    const counts = await this.countsOnly(upstream);
    // Only the due orders and the oldest open one are read from orders, through the index of
    // the open orders.
    const fromOrders = (await this.#context.db.get<{ oldest: number | null; due: number | null }>(
      openOrdersSql(upstream !== undefined),
      { now, ...(upstream === undefined ? {} : { upstream }) },
    ))!;
    return {
      ...counts,
      oldestOpenLocalCreatedAt: fromOrders.oldest === null ? null : Number(fromOrders.oldest),
      dueForPoll: Number(fromOrders.due ?? 0),
    };
  }

  /**
   * The counts of {@link countByStatus} without the reads of the open orders: `order_counts`
   * alone (schema 27, kept by triggers on orders), a few rows whatever the number of orders.
   */
  async countsOnly(upstream?: string): Promise<StoredCounts> {
    const { db } = this.#context;
    const only = upstream === undefined ? {} : { upstream };
    const where = upstream === undefined ? 'WHERE TRUE' : 'WHERE upstream = @upstream';
    const places = await db.all<{
      key: string;
      state: SubmissionState;
      open: number;
      stuck: number;
      n: number;
    }>(
      `SELECT status_key AS key, submission_state AS state, open, stuck, SUM(n) AS n FROM order_counts
       ${where} GROUP BY status_key, submission_state, open, stuck HAVING SUM(n) > 0`,
      only,
    );
    const byKey = new Map<string, number>();
    const bySubmissionState = Object.fromEntries(SUBMISSION_STATES.map((s) => [s, 0])) as Record<
      SubmissionState,
      number
    >;
    let total = 0;
    let open = 0;
    let stuck = 0;
    for (const place of places) {
      const n = Number(place.n);
      total += n;
      if (Number(place.open) === 1) open += n;
      if (Number(place.stuck) === 1) stuck += n;
      bySubmissionState[place.state] = (bySubmissionState[place.state] ?? 0) + n;
      if (place.key !== '') byKey.set(place.key, (byKey.get(place.key) ?? 0) + n);
    }
    // In byte order of the key, as SQLite and PostgreSQL (db.dialect.byteOrder) sort it.
    const byStatus: Record<string, number> = {};
    for (const key of [...byKey.keys()].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))) {
      byStatus[key] = byKey.get(key)!;
    }
    return {
      total,
      byStatus,
      bySubmissionState,
      open,
      stuck,
    };
  }
}

/**
 * The oldest open order and the count of due orders of {@link OrderQueries.countByStatus}, of one
 * upstream's (`ofUpstream`: `@upstream`) or of every order, in one read of `orders_open`
 * (schema 32), the index of the open orders only, which holds every column it needs: one
 * upstream's range of it, or all of it. Its cost grows with the open orders, never with the
 * settled ones (test/store/reconcile-plan.test.ts).
 */
export function openOrdersSql(ofUpstream: boolean): string {
  return `SELECT MIN(local_created_at) AS oldest, SUM(CASE WHEN next_poll_at <= @now THEN 1 ELSE 0 END) AS due
          FROM orders WHERE ${ofUpstream ? 'upstream = @upstream AND ' : ''}next_poll_at IS NOT NULL`;
}

/** How many orders wait in the submission queue (of `upstream`, when given), read on `ex` (the writer's admission reads it in its transaction). */
export async function countQueued(ex: SqlExecutor, upstream?: string): Promise<number> {
  const row = await ex.get<{ n: number }>(
    `SELECT COUNT(*) AS n FROM orders ${ex.dialect.indexedBy('orders_queued')} WHERE submission_state = 'queued'${
      upstream === undefined ? '' : ' AND upstream = @upstream'
    }`,
    upstream === undefined ? {} : { upstream },
  );
  return Number(row?.n ?? 0);
}
