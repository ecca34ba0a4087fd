import type { Database, Statement, Transaction } from 'better-sqlite3';
import {
  decideSnapshot,
  isFinalStatus,
  isKnownStatus,
  type Order,
  type OrderData,
  type OrderStatus,
  PARTNER_REF_MAX_LENGTH,
  type SnapshotVerdict,
} from '../upstream/model.js';
import { type OrderSnapshot, readOrderSnapshot } from '../upstream/order-snapshot.js';
import {
  type EventReason,
  type EventSource,
  isSettled,
  type LocalOrder,
  type OrderEventRow,
  type OrderRow,
  toLocalOrder,
} from './local-order.js';
import { OrderQueries } from './order-queries.js';
import { OrderRows } from './order-rows.js';
import { StoreError } from './store-error.js';

/** Default delay before the first poll of a new or just-changed order: its webhook is overdue then. */
export const DEFAULT_FIRST_POLL_DELAY_MS = 30_000;

export interface OrderStoreOptions {
  /** Delay from a change (or creation) to the order's first poll. Default: {@link DEFAULT_FIRST_POLL_DELAY_MS}. */
  firstPollDelayMs?: number;
  /**
   * How long a SUCCESS with its serial number stays open for polling after it first became
   * final, so that a refund whose webhook is lost for good is still found (decisions.md: SUCCESS
   * may still become REFUNDED). Default: 0, settled at once, as before.
   */
  refundWatchMs?: number;
  /** The clock, in ms since the epoch. Default: `Date.now`. */
  now?: () => number;
}

export interface CreateLocalOrderInput {
  /** The idempotency key sent upstream, at most 64 characters. */
  partnerRef: string;
  productCode?: string;
  productId?: string;
  /** The target data sent upstream. */
  data: OrderData;
  callbackUrl?: string;
}

export interface ApplyOptions {
  source: EventSource;
  /** The webhook event id (or another dedupe key): a (source, eventId) pair applies once, ever. */
  eventId?: string;
  /** What to keep in the audit trail. Default: the snapshot itself. */
  payload?: unknown;
  /** When the event reached us, in ms. Default: now. */
  receivedAt?: number;
}

export interface ApplyResult {
  order: LocalOrder;
  /** True when the event moved the order (or created it). */
  changed: boolean;
  reason: EventReason;
  /** True when (source, eventId) had been applied before: nothing was recorded. */
  duplicate: boolean;
  /** True when the order was unknown locally and the snapshot created it. */
  created: boolean;
}

export interface RecordPollInput {
  /** When to poll next, in ms. Ignored (stays null) once the order is settled. */
  nextPollAt: number;
  /** Mark the order stuck; the first marking time is kept. */
  stuck?: boolean;
  /**
   * The poll's answer changed the order: `poll_count` (polls since the last change) restarts at
   * 0 instead of counting this poll. Default: false.
   */
  changed?: boolean;
}

/** Upstream facts that a snapshot carries and an order keeps once known. */
const KEPT_FIELDS = [
  'invoice_number',
  'amount',
  'target',
  'product_name',
  'product_code',
  'serial_number',
  'nickname',
  'created_at',
  'success_at',
] as const;

const ROW_COLUMNS = [
  'partner_ref',
  'invoice_number',
  'product_code',
  'product_id',
  'target_data',
  'callback_url',
  'amount',
  'status',
  'upstream_status',
  'serial_number',
  'nickname',
  'message',
  'target',
  'product_name',
  'created_at',
  'success_at',
  'local_created_at',
  'updated_at',
  'submission_state',
  'rejection_code',
  'rejection_detail',
  'last_polled_at',
  'next_poll_at',
  'poll_count',
  'stuck_at',
  'final_at',
] as const satisfies readonly (keyof OrderRow)[];

type NewOrderRow = Omit<OrderRow, 'id'>;
/** A row with the poll lease (migration 2), which only the claim methods read or write. */
type LeasedOrderRow = OrderRow & { poll_leased_until: number | null };
type NewEventRow = Omit<OrderEventRow, 'id'>;

/**
 * The order store: the only code that writes `orders` and `order_events`. Every change to an
 * order's status goes through {@link OrderStore.applyOrderSnapshot}, whatever its source.
 *
 * Invariant kept by every method: `next_poll_at` is null exactly when the order is settled
 * (FAILED, REFUNDED, SUCCESS with a serial once `refundWatchMs` has passed, or a rejected
 * submission), so the reconciler never loses an open order.
 */
export class OrderStore {
  readonly #firstPollDelayMs: number;
  readonly #refundWatchMs: number;
  readonly #now: () => number;
  readonly #rows: OrderRows;
  /** The reads of the CLI, the metrics and the reconciler. */
  readonly queries: OrderQueries;
  readonly #byPartnerRef: Statement<[string], OrderRow>;
  readonly #insertOrder: Statement<[NewOrderRow]>;
  readonly #insertOrderIfNew: Statement<[NewOrderRow]>;
  readonly #updateOrder: Statement<[OrderRow]>;
  readonly #eventByKey: Statement<[string, string], { partner_ref: string }>;
  readonly #insertEvent: Statement<[NewEventRow]>;
  readonly #due: Statement<[number, number], OrderRow>;
  readonly #claimable: Statement<[number, number, number], OrderRow>;
  readonly #setLease: Statement<[number | null, number]>;
  readonly #claimDueTx: Transaction<
    (limit: number, now: number, leaseMs: number, dueBy: number) => LocalOrder[]
  >;
  readonly #releaseTx: Transaction<(id: number) => void>;
  readonly #claimOneTx: Transaction<
    (ref: string, now: number, leaseMs: number) => { order: LocalOrder; claimed: boolean } | undefined
  >;
  readonly #applyTx: Transaction<
    (snapshot: Order, fields: OrderSnapshot, options: ApplyOptions) => ApplyResult
  >;
  readonly #createTx: Transaction<(row: NewOrderRow) => { order: LocalOrder; created: boolean }>;
  readonly #settleSubmissionTx: Transaction<(ref: string, outcome: SubmissionOutcome) => LocalOrder>;
  readonly #recordPollTx: Transaction<(ref: string, input: RecordPollInput) => LocalOrder>;

  constructor(
    db: Database,
    {
      firstPollDelayMs = DEFAULT_FIRST_POLL_DELAY_MS,
      refundWatchMs = 0,
      now = Date.now,
    }: OrderStoreOptions = {},
  ) {
    if (!Number.isFinite(firstPollDelayMs) || firstPollDelayMs < 0) {
      throw new RangeError(`firstPollDelayMs must be a number of ms ≥ 0, got ${firstPollDelayMs}`);
    }
    if (!Number.isFinite(refundWatchMs) || refundWatchMs < 0) {
      throw new RangeError(`refundWatchMs must be a number of ms ≥ 0, got ${refundWatchMs}`);
    }
    this.#refundWatchMs = refundWatchMs;
    this.#firstPollDelayMs = firstPollDelayMs;
    this.#now = now;
    this.#rows = new OrderRows(db, now);
    this.queries = new OrderQueries(this.#rows);

    const columns = ROW_COLUMNS.join(', ');
    const values = ROW_COLUMNS.map((c) => `@${c}`).join(', ');
    this.#byPartnerRef = db.prepare('SELECT * FROM orders WHERE partner_ref = ?');
    this.#insertOrder = db.prepare(`INSERT INTO orders (${columns}) VALUES (${values})`);
    this.#insertOrderIfNew = db.prepare(
      `INSERT INTO orders (${columns}) VALUES (${values}) ON CONFLICT (partner_ref) DO NOTHING`,
    );
    this.#updateOrder = db.prepare(
      `UPDATE orders SET ${ROW_COLUMNS.map((c) => `${c} = @${c}`).join(', ')} WHERE id = @id`,
    );
    this.#eventByKey = db.prepare('SELECT partner_ref FROM order_events WHERE source = ? AND event_id = ?');
    this.#insertEvent = db.prepare(
      `INSERT INTO order_events
         (partner_ref, source, event_id, status, payload, received_at, applied_at, changed, reason)
       VALUES
         (@partner_ref, @source, @event_id, @status, @payload, @received_at, @applied_at, @changed, @reason)`,
    );
    this.#due = db.prepare('SELECT * FROM orders WHERE next_poll_at <= ? ORDER BY next_poll_at, id LIMIT ?');
    this.#claimable = db.prepare(
      `SELECT * FROM orders
       WHERE next_poll_at <= ? AND (poll_leased_until IS NULL OR poll_leased_until <= ?)
       ORDER BY next_poll_at, id LIMIT ?`,
    );
    this.#setLease = db.prepare('UPDATE orders SET poll_leased_until = ? WHERE id = ?');

    this.#applyTx = db.transaction((snapshot, fields, options) => this.#apply(snapshot, fields, options));
    this.#createTx = db.transaction((row) => {
      const created = this.#insertOrderIfNew.run(row).changes === 1;
      return { order: toLocalOrder(this.#byPartnerRef.get(row.partner_ref)!), created };
    });
    this.#settleSubmissionTx = db.transaction((ref, outcome) => this.#settleSubmission(ref, outcome));
    this.#recordPollTx = db.transaction((ref, input) => this.#recordPoll(ref, input));
    this.#claimDueTx = db.transaction((limit, now, leaseMs, dueBy) => {
      const rows = this.#claimable.all(dueBy, now, limit);
      for (const row of rows) this.#setLease.run(now + leaseMs, row.id);
      return rows.map(toLocalOrder);
    });
    this.#releaseTx = db.transaction((id) => {
      this.#setLease.run(null, id);
    });
    this.#claimOneTx = db.transaction((ref, now, leaseMs) => {
      const row = this.#rows.find(ref, ref);
      if (!row) return undefined;
      const { poll_leased_until: leasedUntil } = row as LeasedOrderRow;
      if (leasedUntil !== null && leasedUntil > now) return { order: toLocalOrder(row), claimed: false };
      this.#setLease.run(now + leaseMs, row.id);
      return { order: toLocalOrder(row), claimed: true };
    });
  }

  /**
   * Writes an order before it is submitted upstream (submission state `pending`). A partner_ref
   * that exists already returns the existing order with `created: false`: never a second row.
   * The order is due for a poll after `firstPollDelayMs`, so one whose placing process dies
   * before the create answer is still resolved by the reconciler.
   */
  createLocalOrder(input: CreateLocalOrderInput): { order: LocalOrder; created: boolean } {
    const { partnerRef } = input;
    if (typeof partnerRef !== 'string' || partnerRef === '' || partnerRef.length > PARTNER_REF_MAX_LENGTH) {
      throw new StoreError(
        'INVALID_PARTNER_REF',
        `partner_ref must be 1 to ${PARTNER_REF_MAX_LENGTH} characters, got ${JSON.stringify(partnerRef)}`,
      );
    }
    const now = this.#now();
    return this.#rows.write(this.#createTx, {
      partner_ref: partnerRef,
      invoice_number: null,
      product_code: input.productCode ?? null,
      product_id: input.productId ?? null,
      target_data: JSON.stringify(input.data),
      callback_url: input.callbackUrl ?? null,
      amount: null,
      status: null,
      upstream_status: null,
      serial_number: null,
      nickname: null,
      message: null,
      target: null,
      product_name: null,
      created_at: null,
      success_at: null,
      local_created_at: now,
      updated_at: now,
      submission_state: 'pending',
      rejection_code: null,
      rejection_detail: null,
      last_polled_at: null,
      next_poll_at: now + this.#firstPollDelayMs,
      poll_count: 0,
      stuck_at: null,
      final_at: null,
    });
  }

  /**
   * Applies an upstream order snapshot (a create answer, a webhook, a poll): the only way an
   * order's status changes. In one immediate transaction it
   * 1. returns `duplicate: true` and records nothing when (source, eventId) was applied before;
   * 2. finds the order by partner_ref, else invoice_number, or creates it (placed elsewhere, or
   *    its webhook beat the create answer);
   * 3. decides with decisions.md's state machine (see `decideSnapshot`): an order with no status
   *    yet takes any known status (`initial`), a newer state may skip late or lost ones, and a
   *    status outside the table is kept in `upstream_status` only;
   * 4. marks the submission accepted, records the event, and schedules polling: none once the
   *    order is settled, `firstPollDelayMs` from now when it changed, unchanged otherwise.
   *
   * Throws `INVALID_SNAPSHOT` (permanent) for a snapshot without a status or any reference.
   */
  applyOrderSnapshot(snapshot: Order, options: ApplyOptions): ApplyResult {
    const read = readOrderSnapshot(snapshot);
    if (!read.ok) throw new StoreError('INVALID_SNAPSHOT', `${read.problem}: park the event`);
    return this.#rows.write(this.#applyTx, snapshot, read.snapshot, options);
  }

  /**
   * Records that the upstream refused the create call (HTTP 400): the submission becomes
   * `rejected` with the upstream's code and detail, and polling ends. No effect on an order the
   * upstream has already confirmed. Never touches `status`.
   */
  markRejected(partnerRef: string, code: string, detail: string): LocalOrder {
    return this.#rows.write(this.#settleSubmissionTx, partnerRef, { state: 'rejected', code, detail });
  }

  /**
   * Records that the create call's outcome is unknown (it timed out after its retries): the
   * submission becomes `unknown` and the order is due for a poll now. No effect on an order the
   * upstream has already confirmed or rejected. Never touches `status`.
   */
  markSubmissionUnknown(partnerRef: string): LocalOrder {
    return this.#rows.write(this.#settleSubmissionTx, partnerRef, { state: 'unknown' });
  }

  /** Up to `limit` orders whose next poll time has come, the longest-due first. */
  dueForPoll(limit: number, now: number = this.#now()): LocalOrder[] {
    return this.#due.all(now, limit).map(toLocalOrder);
  }

  /**
   * Claims up to `limit` due orders for polling, longest-due first, in one immediate
   * transaction: each gets a lease (`poll_leased_until = now + leaseMs`) and orders under
   * another live lease are skipped, so two reconcilers never poll the same order at once. The
   * schedule (`next_poll_at`) is untouched: an order whose claim is released keeps its place.
   * {@link recordPoll} and {@link releasePollClaim} end the lease; a crashed poller's lease
   * simply expires. `dueBy` (default `now`) bounds which orders count as due: a pass passes its
   * start time, so an order it polled and rescheduled is not due again within the same pass.
   */
  claimDueForPoll(limit: number, now: number = this.#now(), leaseMs = 120_000, dueBy = now): LocalOrder[] {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`limit must be a whole number ≥ 1, got ${limit}`);
    }
    return this.#rows.write(this.#claimDueTx, limit, now, leaseMs, Math.min(dueBy, now));
  }

  /**
   * Claims one order (by partner_ref, else invoice number) for an early poll, due or not, open
   * or settled: `claimed: false` when another poller holds a live lease on it; undefined when
   * the order is unknown locally.
   */
  claimForPoll(
    ref: string,
    now: number = this.#now(),
    leaseMs = 120_000,
  ): { order: LocalOrder; claimed: boolean } | undefined {
    return this.#rows.write(this.#claimOneTx, ref, now, leaseMs);
  }

  /** Ends a poll lease without recording a poll: the order keeps its place in the schedule. */
  releasePollClaim(partnerRef: string): void {
    const row = this.#byPartnerRef.get(partnerRef);
    if (row) this.#rows.write(this.#releaseTx, row.id);
  }

  /**
   * Records a poll of an order, after its answer (if any) went through
   * {@link applyOrderSnapshot}: sets `last_polled_at`, counts the poll (or restarts the count
   * when the poll `changed` the order), sets the next poll time unless the order is settled,
   * and ends the poll lease. `stuck` marks it stuck (the first time is kept).
   */
  recordPoll(partnerRef: string, input: RecordPollInput): LocalOrder {
    return this.#rows.write(this.#recordPollTx, partnerRef, input);
  }

  #apply(snapshot: Order, fields: OrderSnapshot, options: ApplyOptions): ApplyResult {
    const now = this.#now();
    const eventId = options.eventId ?? null;
    if (eventId !== null) {
      const seen = this.#eventByKey.get(options.source, eventId);
      if (seen) {
        const order = toLocalOrder(this.#byPartnerRef.get(seen.partner_ref)!);
        return { order, changed: false, reason: 'duplicate_event', duplicate: true, created: false };
      }
    }

    const current = this.#rows.find(fields.partner_ref, fields.invoice_number);
    let row: OrderRow;
    let verdict: SnapshotVerdict;
    let created = false;
    if (!current) {
      if (fields.partner_ref === null) {
        throw new StoreError(
          'INVALID_SNAPSHOT',
          `order ${fields.invoice_number} is unknown locally and its snapshot has no partner_ref: park the event`,
        );
      }
      verdict = decideSnapshot({ status: null, serial_number: null }, fields);
      const fresh = this.#schedule(this.#newRowFrom(fields, now), null, verdict.apply, now);
      const id = Number(this.#insertOrder.run(fresh).lastInsertRowid);
      row = { ...fresh, id };
      created = true;
    } else {
      verdict = decideSnapshot(
        { status: current.status as OrderStatus | null, serial_number: current.serial_number },
        fields,
      );
      row = this.#schedule(this.#merge(current, fields, verdict), current, verdict.apply, now);
      if (ROW_COLUMNS.some((c) => row[c] !== current[c])) {
        row.updated_at = now;
        this.#updateOrder.run(row);
      }
    }

    const changed = created || verdict.apply;
    this.#insertEvent.run({
      partner_ref: row.partner_ref,
      source: options.source,
      event_id: eventId,
      status: fields.status,
      payload: JSON.stringify(options.payload ?? snapshot),
      received_at: options.receivedAt ?? now,
      applied_at: now,
      changed: changed ? 1 : 0,
      reason: verdict.reason,
    });
    return { order: toLocalOrder(row), changed, reason: verdict.reason, duplicate: false, created };
  }

  #newRowFrom(fields: OrderSnapshot, now: number): OrderRow {
    return {
      id: 0,
      partner_ref: fields.partner_ref!,
      invoice_number: fields.invoice_number,
      product_code: fields.product_code,
      product_id: null,
      target_data: null,
      callback_url: null,
      amount: fields.amount,
      status: isKnownStatus(fields.status) ? fields.status : null,
      upstream_status: fields.status,
      serial_number: fields.serial_number,
      nickname: fields.nickname,
      message: fields.message,
      target: fields.target,
      product_name: fields.product_name,
      created_at: fields.created_at,
      success_at: fields.success_at,
      local_created_at: now,
      updated_at: now,
      submission_state: 'accepted',
      rejection_code: null,
      rejection_detail: null,
      last_polled_at: null,
      next_poll_at: null,
      poll_count: 0,
      stuck_at: null,
      final_at: null,
    };
  }

  /** The order after a snapshot, before scheduling. Any snapshot proves the upstream has it. */
  #merge(current: OrderRow, fields: OrderSnapshot, verdict: { apply: boolean; reason: string }): OrderRow {
    const next: OrderRow = {
      ...current,
      submission_state: 'accepted',
      rejection_code: null,
      rejection_detail: null,
    };
    if (verdict.apply) {
      next.status = fields.status;
      next.upstream_status = fields.status;
      // `message` belongs to the state (a reason on FAILED/REFUNDED, null otherwise); the other
      // facts never go back to null upstream, so a snapshot missing one keeps what we know.
      next.message = fields.message;
      for (const field of KEPT_FIELDS) (next[field] as unknown) = fields[field] ?? current[field];
    } else if (verdict.reason === 'unknown_status') {
      next.upstream_status = fields.status;
      for (const field of KEPT_FIELDS) (next[field] as unknown) = current[field] ?? fields[field];
    }
    return next;
  }

  /** Polling bookkeeping after a snapshot (see the class invariant). */
  #schedule(next: OrderRow, current: OrderRow | null, changed: boolean, now: number): OrderRow {
    if (next.status !== null && isFinalStatus(next.status)) next.final_at = current?.final_at ?? now;
    if (this.#settled(next, now)) {
      next.next_poll_at = null;
    } else if (changed || current === null) {
      next.next_poll_at = now + this.#firstPollDelayMs;
      next.poll_count = 0;
    } else {
      next.next_poll_at = current.next_poll_at ?? now + this.#firstPollDelayMs;
    }
    return next;
  }

  /** {@link isSettled}, except that a SUCCESS stays open for `refundWatchMs` after it became final. */
  #settled(row: OrderRow, now: number): boolean {
    if (!isSettled(row)) return false;
    if (this.#refundWatchMs === 0 || row.status !== 'SUCCESS' || row.final_at === null) return true;
    return now >= row.final_at + this.#refundWatchMs;
  }

  #settleSubmission(ref: string, outcome: SubmissionOutcome): LocalOrder {
    const now = this.#now();
    const current = this.#rows.mustFind(ref);
    const open = current.submission_state === 'pending' || current.submission_state === 'unknown';
    const row: OrderRow = { ...current };
    if (open && outcome.state === 'rejected') {
      Object.assign(row, {
        submission_state: 'rejected',
        rejection_code: outcome.code,
        rejection_detail: outcome.detail,
        next_poll_at: null,
        updated_at: now,
      });
    } else if (open) {
      Object.assign(row, { submission_state: 'unknown', next_poll_at: now, updated_at: now });
    }
    if (open) this.#updateOrder.run(row);
    this.#insertEvent.run({
      partner_ref: row.partner_ref,
      source: 'create',
      event_id: null,
      status: null,
      payload: JSON.stringify(outcome),
      received_at: now,
      applied_at: now,
      changed: open ? 1 : 0,
      reason: open
        ? outcome.state === 'rejected'
          ? 'rejected'
          : 'submission_unknown'
        : 'submission_settled',
    });
    return toLocalOrder(row);
  }

  #recordPoll(ref: string, { nextPollAt, stuck = false, changed = false }: RecordPollInput): LocalOrder {
    const now = this.#now();
    const current = this.#rows.mustFind(ref);
    const row: OrderRow = {
      ...current,
      last_polled_at: now,
      poll_count: changed ? 0 : current.poll_count + 1,
      next_poll_at: this.#settled(current, now) ? null : nextPollAt,
      stuck_at: stuck ? (current.stuck_at ?? now) : current.stuck_at,
      updated_at: now,
    };
    this.#updateOrder.run(row);
    this.#setLease.run(null, row.id);
    return toLocalOrder(row);
  }
}

/** What the create call said, when it did not answer with an order. */
type SubmissionOutcome = { state: 'rejected'; code: string; detail: string } | { state: 'unknown' };
