import type { Statement, Transaction } from 'better-sqlite3';
import { type PublicOrder, samePublicOrder, toPublicOrder } from '../orders/public-order.js';
import {
  decideSnapshot,
  isFinalStatus,
  isKnownStatus,
  type Order,
  type OrderData,
  type OrderStatus,
  partnerRefProblem,
  type SnapshotVerdict,
} from '../upstream/model.js';
import { type OrderSnapshot, readOrderSnapshot } from '../upstream/order-snapshot.js';
import type { BalanceLedger } from './balance.js';
import type { ChangeFeed, OrderEventType } from './feed.js';
import {
  type EventReason,
  type EventSource,
  type LocalOrder,
  type OrderEventRow,
  type OrderRow,
  type SubmissionState,
  toLocalOrder,
} from './local-order.js';
import type { OrderRows } from './order-rows.js';
import type { PollSchedule } from './poll-schedule.js';
import { StoreError } from './store-error.js';

export interface CreateLocalOrderInput {
  /** The idempotency key sent upstream: 1 to 64 characters ({@link partnerRefProblem}). */
  partnerRef: string;
  productCode?: string;
  productId?: string;
  /** The target data sent upstream. */
  data: OrderData;
  callbackUrl?: string;
  /**
   * Queue it for the submission pump (submission `queued`: the shop API's orders, sent in arrival
   * order as the budget allows) instead of submitting it now (`pending`). Default: false.
   */
  queued?: boolean;
}

export interface ApplyOptions {
  source: EventSource;
  /** The webhook event id (or another dedupe key): a (source, eventId) pair applies once, ever. */
  eventId?: string;
  /** What to keep in the audit trail. Default: the snapshot itself. */
  payload?: unknown;
  /** When the event reached us, in ms. Default: now. */
  receivedAt?: number;
  /**
   * When the upstream reached the state the snapshot shows, in ms, if the source says (a
   * webhook's `created_at`): with `receivedAt`, it teaches the store the upstream's pace.
   */
  occurredAt?: number;
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
  'blocked_code',
  'blocked_detail',
  'last_polled_at',
  'next_poll_at',
  'poll_count',
  'stuck_at',
  'final_at',
  'version',
] as const satisfies readonly (keyof OrderRow)[];

type NewOrderRow = Omit<OrderRow, 'id'>;
type NewEventRow = Omit<OrderEventRow, 'id'>;

/** A new order that nothing is known of yet but its reference, submission state and time. */
function newOrderRow(partnerRef: string, now: number, submission: SubmissionState): NewOrderRow {
  return {
    partner_ref: partnerRef,
    invoice_number: null,
    product_code: null,
    product_id: null,
    target_data: null,
    callback_url: null,
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
    submission_state: submission,
    rejection_code: null,
    rejection_detail: null,
    blocked_code: null,
    blocked_detail: null,
    last_polled_at: null,
    next_poll_at: null,
    poll_count: 0,
    stuck_at: null,
    final_at: null,
    version: 0,
  };
}

/**
 * The only writer of order state: the orders themselves and their audit trail (`order_events`).
 * Every change to an order's status goes through {@link OrderWriter.applyOrderSnapshot},
 * whatever its source; the create call's other outcomes are recorded by {@link markRejected},
 * {@link markBlocked} and {@link markSubmissionUnknown}. Each write asks the {@link PollSchedule}, in the same
 * transaction, when the order is to be polled next.
 */
export class OrderWriter {
  readonly #rows: OrderRows;
  readonly #schedule: PollSchedule;
  readonly #feed: ChangeFeed;
  readonly #ledger: BalanceLedger;
  readonly #insertOrder: Statement<[NewOrderRow]>;
  readonly #insertOrderIfNew: Statement<[NewOrderRow]>;
  readonly #updateOrder: Statement<[OrderRow]>;
  readonly #eventByKey: Statement<[string, string], { partner_ref: string }>;
  readonly #insertEvent: Statement<[NewEventRow]>;
  readonly #applyTx: Transaction<
    (snapshot: Order, fields: OrderSnapshot, options: ApplyOptions) => ApplyResult
  >;
  readonly #createTx: Transaction<(row: NewOrderRow) => { order: LocalOrder; created: boolean }>;
  readonly #settleSubmissionTx: Transaction<(ref: string, outcome: SubmissionOutcome) => LocalOrder>;

  constructor(rows: OrderRows, schedule: PollSchedule, feed: ChangeFeed, ledger: BalanceLedger) {
    this.#rows = rows;
    this.#schedule = schedule;
    this.#feed = feed;
    this.#ledger = ledger;
    const { db } = rows;
    const columns = ROW_COLUMNS.join(', ');
    const values = ROW_COLUMNS.map((c) => `@${c}`).join(', ');
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
    this.#applyTx = db.transaction((snapshot, fields, options) => this.#apply(snapshot, fields, options));
    this.#createTx = db.transaction((row) => {
      const created = this.#insertOrderIfNew.run(row).changes === 1;
      return { order: toLocalOrder(this.#rows.find(row.partner_ref, null)!), created };
    });
    this.#settleSubmissionTx = db.transaction((ref, outcome) => this.#settleSubmission(ref, outcome));
  }

  /**
   * Writes an order before it is submitted upstream (submission state `pending`). A partner_ref
   * that exists already returns the existing order with `created: false`: never a second row.
   * The schedule makes it due for a poll like any new order, so one whose placing process dies
   * before the create answer is still resolved by the reconciler.
   */
  createLocalOrder(input: CreateLocalOrderInput): { order: LocalOrder; created: boolean } {
    const { partnerRef } = input;
    const problem = partnerRefProblem(partnerRef);
    if (problem) throw new StoreError('INVALID_PARTNER_REF', problem);
    const now = this.#rows.now();
    const row: NewOrderRow = {
      ...newOrderRow(partnerRef, now, input.queued ? 'queued' : 'pending'),
      product_code: input.productCode ?? null,
      product_id: input.productId ?? null,
      target_data: JSON.stringify(input.data),
      callback_url: input.callbackUrl ?? null,
    };
    return this.#rows.write(this.#createTx, this.#withSchedule(row, null, true, now));
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
   * 4. marks the submission accepted, records the event, and sets the order's next poll as the
   *    schedule says ({@link PollSchedule.afterChange});
   * 5. accounts the balance: a debit when the upstream first accepts the order, a credit when it
   *    first becomes FAILED or REFUNDED ({@link BalanceLedger.afterOrderWrite}).
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
   * Records that the upstream refused the create call for our configuration (401/403): the
   * submission becomes `blocked` with the upstream's code and detail, never `rejected`, and the
   * order is due at once, so the reconciler submits it again with its partner_ref as soon as a
   * probe shows the configuration works. No effect on an order the upstream has already
   * confirmed or rejected. Never touches `status`.
   */
  markBlocked(partnerRef: string, code: string, detail: string): LocalOrder {
    return this.#rows.write(this.#settleSubmissionTx, partnerRef, { state: 'blocked', code, detail });
  }

  /**
   * Records that the create call's outcome is unknown (no definite answer after its retries):
   * the submission becomes `unknown` and the order is due for a poll now. No effect on an order
   * the upstream has already confirmed or rejected. Never touches `status`.
   */
  markSubmissionUnknown(partnerRef: string): LocalOrder {
    return this.#rows.write(this.#settleSubmissionTx, partnerRef, { state: 'unknown' });
  }

  #apply(snapshot: Order, fields: OrderSnapshot, options: ApplyOptions): ApplyResult {
    const now = this.#rows.now();
    const eventId = options.eventId ?? null;
    if (eventId !== null) {
      const seen = this.#eventByKey.get(options.source, eventId);
      if (seen) {
        const order = toLocalOrder(this.#rows.find(seen.partner_ref, null)!);
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
      const fresh = this.#withSchedule(this.#newRowFrom(fields, now), null, verdict.apply, now);
      this.#publish(null, fresh, now);
      const id = Number(this.#insertOrder.run(fresh).lastInsertRowid);
      row = { ...fresh, id };
      created = true;
    } else {
      verdict = decideSnapshot(
        { status: current.status as OrderStatus | null, serial_number: current.serial_number },
        fields,
      );
      row = this.#withSchedule(this.#merge(current, fields, verdict), current, verdict.apply, now);
      this.#publish(current, row, now);
      if (ROW_COLUMNS.some((c) => row[c] !== current[c])) {
        row.updated_at = now;
        this.#updateOrder.run(row);
      }
    }

    const changed = created || verdict.apply;
    this.#ledger.afterOrderWrite(current ?? null, row);
    this.#learnPace(row, current?.status ?? null, fields, verdict.apply, options);
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

  /**
   * Feeds the upstream's pace (order-pace.ts) from an applied event: the time from the order's
   * upstream creation to a new PROCESSING, SUCCESS or FAILED (SUCCESS by its `success_at`, the
   * others by the webhook's event time; a poll that finds them says nothing of when), once per
   * order and state; and, for a webhook, its delivery delay.
   */
  #learnPace(
    row: OrderRow,
    previous: string | null,
    fields: OrderSnapshot,
    applied: boolean,
    options: ApplyOptions,
  ): void {
    const { pace } = this.#schedule;
    const { occurredAt, receivedAt, source } = options;
    if (source === 'webhook' && occurredAt !== undefined && receivedAt !== undefined) {
      pace.recordDelivery(receivedAt - occurredAt);
    }
    const state = row.status;
    if (
      !applied ||
      state === previous ||
      (state !== 'PROCESSING' && state !== 'SUCCESS' && state !== 'FAILED')
    ) {
      return;
    }
    const reachedAt =
      state === 'SUCCESS' && fields.success_at !== null ? Date.parse(fields.success_at) : occurredAt;
    if (reachedAt === undefined || row.created_at === null) return;
    pace.recordStateReached(row.product_code, state, reachedAt - Date.parse(row.created_at));
  }

  #newRowFrom(fields: OrderSnapshot, now: number): OrderRow {
    const row: OrderRow = { id: 0, ...newOrderRow(fields.partner_ref!, now, 'accepted') };
    for (const field of KEPT_FIELDS) (row[field] as unknown) = fields[field];
    row.status = isKnownStatus(fields.status) ? fields.status : null;
    row.upstream_status = fields.status;
    row.message = fields.message;
    return row;
  }

  /** The order after a snapshot, before scheduling. Any snapshot proves the upstream has it. */
  #merge(current: OrderRow, fields: OrderSnapshot, verdict: { apply: boolean; reason: string }): OrderRow {
    const next: OrderRow = {
      ...current,
      submission_state: 'accepted',
      rejection_code: null,
      rejection_detail: null,
      blocked_code: null,
      blocked_detail: null,
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

  /**
   * The change feed's part of a write (feed.ts): when the order's public representation changed
   * (or a new order is known to the upstream), its version goes up by one and the event of the
   * change is appended, in the write's own transaction. The type says what changed: the upstream
   * took the order (`order.submitted`), refused it (`order.rejected`) or our configuration
   * (`order.blocked`); anything else, a status, a serial, an unknown submission, is
   * `order.updated`. An order written locally before its submission has no event yet (version 0).
   */
  #publish(current: OrderRow | null, next: NewOrderRow, now: number): void {
    const version = (current?.version ?? 0) + 1;
    const after = toPublicOrder({ ...next, version, updated_at: now });
    const type = changeType(current, next.submission_state, after);
    if (type === null) return;
    next.version = version;
    next.updated_at = now;
    this.#feed.append(type, after, now);
  }

  /** The order after a write: `final_at` the first time it is final, then the schedule's columns. */
  #withSchedule<R extends NewOrderRow>(next: R, current: OrderRow | null, changed: boolean, now: number): R {
    if (next.status !== null && isFinalStatus(next.status)) next.final_at = current?.final_at ?? now;
    return Object.assign(next, this.#schedule.afterChange(next, current, changed, now));
  }

  #settleSubmission(ref: string, outcome: SubmissionOutcome): LocalOrder {
    const now = this.#rows.now();
    const current = this.#rows.mustFind(ref);
    const open = OPEN_SUBMISSIONS.has(current.submission_state);
    const row: OrderRow = { ...current };
    if (open) {
      Object.assign(row, {
        submission_state: outcome.state,
        rejection_code: outcome.state === 'rejected' ? outcome.code : null,
        rejection_detail: outcome.state === 'rejected' ? outcome.detail : null,
        blocked_code: outcome.state === 'blocked' ? outcome.code : null,
        blocked_detail: outcome.state === 'blocked' ? outcome.detail : null,
        updated_at: now,
      });
      Object.assign(row, this.#schedule.afterSubmissionOutcome(row, now));
      this.#publish(current, row, now);
      this.#updateOrder.run(row);
    }
    this.#insertEvent.run({
      partner_ref: row.partner_ref,
      source: 'create',
      event_id: null,
      status: null,
      payload: JSON.stringify(outcome),
      received_at: now,
      applied_at: now,
      changed: open ? 1 : 0,
      reason: open ? OUTCOME_REASON[outcome.state] : 'submission_settled',
    });
    return toLocalOrder(row);
  }
}

/**
 * The feed event of a write from `current` (null: a new row) to an order whose submission is
 * `submission` and whose public representation is `after`, or null when a reader sees no change.
 */
function changeType(
  current: OrderRow | null,
  submission: SubmissionState,
  after: PublicOrder,
): OrderEventType | null {
  if (current === null && (submission === 'pending' || submission === 'queued')) return null;
  if (current !== null && samePublicOrder(toPublicOrder(current), after)) return null;
  if (submission !== current?.submission_state) {
    if (submission === 'accepted') return 'order.submitted';
    if (submission === 'rejected') return 'order.rejected';
    if (submission === 'blocked') return 'order.blocked';
  }
  return 'order.updated';
}

/** What the create call said, when it did not answer with an order. */
type SubmissionOutcome =
  | { state: 'rejected' | 'blocked'; code: string; detail: string }
  | { state: 'unknown' };

/** Submissions a create outcome can still settle: the upstream has neither confirmed nor rejected them. */
const OPEN_SUBMISSIONS: ReadonlySet<SubmissionState> = new Set(['queued', 'pending', 'unknown', 'blocked']);

const OUTCOME_REASON: Record<SubmissionOutcome['state'], EventReason> = {
  rejected: 'rejected',
  unknown: 'submission_unknown',
  blocked: 'blocked',
};
