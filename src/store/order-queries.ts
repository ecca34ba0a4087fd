import type { Statement } from 'better-sqlite3';
import { type PublicOrder, toPublicOrder } from '../orders/public-order.js';
import { isKnownStatus } from '../upstream/model.js';
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
import type { OrderRows } from './order-rows.js';
import { CHECKED_AT_SQL } from './poll-schedule.js';

/** The column a status filter reads: a status of decisions.md, else a submission state, else the upstream's string. */
function statusColumn(status: string): 'status' | 'submission_state' | 'upstream_status' {
  if (isKnownStatus(status)) return 'status';
  return (SUBMISSION_STATES as readonly string[]).includes(status) ? 'submission_state' : 'upstream_status';
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
  readonly #rows: OrderRows;
  readonly #eventsOf: Statement<[string], OrderEventRow>;
  readonly #eventsAfter: Statement<[number, number], OrderEventRow>;
  readonly #lastEventId: Statement<[], { id: number | null }>;
  readonly #countQueued: Statement<[], { n: number }>;

  constructor(rows: OrderRows) {
    this.#rows = rows;
    this.#eventsOf = rows.db.prepare('SELECT * FROM order_events WHERE partner_ref = ? ORDER BY id');
    this.#eventsAfter = rows.db.prepare('SELECT * FROM order_events WHERE id > ? ORDER BY id LIMIT ?');
    this.#lastEventId = rows.db.prepare('SELECT MAX(id) AS id FROM order_events');
    this.#countQueued = rows.db.prepare(
      "SELECT COUNT(*) AS n FROM orders INDEXED BY orders_queued WHERE submission_state = 'queued'",
    );
  }

  /** Events of every order applied after event `afterId`, in the order they were applied. */
  eventsAfter(afterId: number, limit = 500): OrderEvent[] {
    return this.#eventsAfter.all(afterId, limit).map(toOrderEvent);
  }

  /** The id of the last event applied (0 when none was): where a follower starts. */
  lastEventId(): number {
    return this.#lastEventId.get()?.id ?? 0;
  }

  /** The order with this partner_ref, else with this invoice number. */
  getOrder(ref: string): LocalOrder | undefined {
    const row = this.#rows.find(ref, ref);
    return row && toLocalOrder(row);
  }

  /** The public representation of the order with this partner_ref, else invoice number (docs/api.md). */
  getPublicOrder(ref: string): PublicOrder | undefined {
    const row = this.#rows.find(ref, ref);
    return row && toPublicOrder(row);
  }

  /**
   * A page of orders in their public representation, newest first (by row id, so a page never
   * shifts when orders are added), for the API's cursor pagination: those with an id below
   * `beforeId`, `status` as in {@link listOrders}, written locally within
   * [`createdFrom`, `createdTo`) (ms). Returns one row more than `limit` when there is more.
   */
  pageOrders(input: {
    status?: string;
    createdFrom?: number;
    createdTo?: number;
    beforeId?: number;
    limit: number;
  }): Array<{ id: number; order: PublicOrder }> {
    const where: string[] = [];
    const args: Array<string | number> = [];
    if (input.status !== undefined) {
      where.push(`${statusColumn(input.status)} = ?`);
      args.push(input.status);
    }
    if (input.createdFrom !== undefined) {
      where.push('local_created_at >= ?');
      args.push(input.createdFrom);
    }
    if (input.createdTo !== undefined) {
      where.push('local_created_at < ?');
      args.push(input.createdTo);
    }
    if (input.beforeId !== undefined) {
      where.push('id < ?');
      args.push(input.beforeId);
    }
    const sql = `SELECT * FROM orders ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ?`;
    return this.#rows.db
      .prepare<Array<string | number>, OrderRow>(sql)
      .all(...args, input.limit + 1)
      .map((row) => ({ id: row.id, order: toPublicOrder(row) }));
  }

  /** How many orders wait in the submission queue (submission `queued`). */
  countQueued(): number {
    return this.#countQueued.get()?.n ?? 0;
  }

  /** The public representation of the order with exactly this partner_ref. */
  getPublicOrderByPartnerRef(partnerRef: string): PublicOrder | undefined {
    const row = this.#rows.find(partnerRef, null);
    return row && toPublicOrder(row);
  }

  /** Orders, newest local creation first. See {@link ListOrdersInput.status} for the filter. */
  listOrders(input: ListOrdersInput = {}): LocalOrder[] {
    return this.#listRows(input).map(toLocalOrder);
  }

  /** {@link listOrders} in the public representation (`order list --json`). */
  listPublicOrders(input: ListOrdersInput = {}): PublicOrder[] {
    return this.#listRows(input).map(toPublicOrder);
  }

  #listRows({ status, limit = DEFAULT_LIST_LIMIT }: ListOrdersInput): OrderRow[] {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`limit must be a whole number ≥ 1, got ${limit}`);
    }
    const { db } = this.#rows;
    const order = 'ORDER BY local_created_at DESC, id DESC LIMIT ?';
    if (status === undefined) {
      return db.prepare<[number], OrderRow>(`SELECT * FROM orders ${order}`).all(limit);
    }
    const column = statusColumn(status);
    return db
      .prepare<[string, number], OrderRow>(`SELECT * FROM orders WHERE ${column} = ? ${order}`)
      .all(status, limit);
  }

  /** The audit trail of an order (by partner_ref or invoice number), oldest first. */
  listEvents(ref: string): OrderEvent[] {
    const row = this.#rows.find(ref, ref);
    return row ? this.#eventsOf.all(row.partner_ref).map(toOrderEvent) : [];
  }

  /**
   * The audit's coverage: of the SUCCESS orders that became final within `windowMs` before
   * `now`, how many were checked with the upstream within the last day (their last poll or
   * audit read, or their becoming final, is that recent: {@link CHECKED_AT_SQL}).
   */
  auditCoverage(windowMs: number, now: number = this.#rows.now()): AuditCoverage {
    return this.#rows.db
      .prepare<[number, number], AuditCoverage>(
        `SELECT COUNT(*) AS successOrders,
                COALESCE(SUM(${CHECKED_AT_SQL} > ?), 0) AS checkedLastDay
         FROM orders WHERE status = 'SUCCESS' AND final_at >= ?`,
      )
      .get(now - AUDIT_COVERAGE_PERIOD_MS, now - windowMs)!;
  }

  /** Counts for `h2h-sync status`. */
  countByStatus(now: number = this.#rows.now()): OrderCounts {
    const { db } = this.#rows;
    const byStatus: Record<string, number> = {};
    for (const { key, n } of db
      .prepare<[], { key: string; n: number }>(
        `SELECT COALESCE(status, upstream_status) AS key, COUNT(*) AS n FROM orders
         WHERE key IS NOT NULL GROUP BY key ORDER BY key`,
      )
      .all()) {
      byStatus[key] = n;
    }
    const bySubmissionState = Object.fromEntries(SUBMISSION_STATES.map((s) => [s, 0])) as Record<
      SubmissionState,
      number
    >;
    for (const { state, n } of db
      .prepare<[], { state: SubmissionState; n: number }>(
        'SELECT submission_state AS state, COUNT(*) AS n FROM orders GROUP BY state',
      )
      .all()) {
      bySubmissionState[state] = n;
    }
    const totals = db
      .prepare<
        [number],
        { total: number; open: number; oldest: number | null; due: number | null; stuck: number | null }
      >(
        `SELECT COUNT(*) AS total,
                COUNT(next_poll_at) AS open,
                MIN(CASE WHEN next_poll_at IS NOT NULL THEN local_created_at END) AS oldest,
                SUM(next_poll_at <= ?) AS due,
                SUM(stuck_at IS NOT NULL AND (next_poll_at IS NOT NULL
                    OR (status = 'SUCCESS' AND serial_number IS NULL))) AS stuck
         FROM orders`,
      )
      .get(now)!;
    return {
      total: totals.total,
      byStatus,
      bySubmissionState,
      open: totals.open,
      oldestOpenLocalCreatedAt: totals.oldest,
      dueForPoll: totals.due ?? 0,
      stuck: totals.stuck ?? 0,
    };
  }
}
