import type { Statement, Transaction } from 'better-sqlite3';
import type { Order } from '../upstream/model.js';
import { type OrderSnapshot, readOrderSnapshot } from '../upstream/order-snapshot.js';
import type { BalanceLedger } from './balance.js';
import type { ChangeFeed } from './feed.js';
import { type EventReason, type LocalOrder, type OrderRow, toLocalOrder } from './local-order.js';
import type { OrderPace } from './order-pace.js';
import type { OrderRows } from './order-rows.js';
import type { PollSchedule } from './poll-schedule.js';
import {
  type ApplyOptions,
  type CreateLocalOrderInput,
  type FeedChange,
  type NewEventRow,
  type NewOrderRow,
  ORDER_COLUMNS,
  type PaceSample,
  planApply,
  planLocalOrder,
  planSettlement,
  type SubmissionOutcome,
} from './rules/apply-plan.js';
import type { PaceInput } from './rules/poll-rules.js';
import { StoreError } from './store-error.js';

export type { ApplyOptions, CreateLocalOrderInput } from './rules/apply-plan.js';

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

/**
 * The only writer of order state: the orders themselves and their audit trail (`order_events`).
 * Every change to an order's status goes through {@link OrderWriter.applyOrderSnapshot},
 * whatever its source; the create call's other outcomes are recorded by {@link markRejected},
 * {@link markBlocked} and {@link markSubmissionUnknown}. What each write does (the state machine's
 * verdict, the merged row, its schedule, its feed event, its audit row, its pace samples) is
 * planned by the pure functions of rules/apply-plan.ts; this class finds the rows, asks for the
 * plan and carries it out in one transaction.
 */
export class OrderWriter {
  readonly #rows: OrderRows;
  readonly #schedule: PollSchedule;
  readonly #feed: ChangeFeed;
  readonly #ledger: BalanceLedger;
  readonly #insertOrder: Statement<[NewOrderRow]>;
  readonly #insertOrderIfNew: Statement<[NewOrderRow]>;
  readonly #updateOrder: Statement<[OrderRow]>;
  /** The rules' pace input: the estimate of a product, read only when a first poll is computed. */
  readonly #paceOf: PaceInput = (productCode) => this.#schedule.pace.estimate(productCode);
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
    const columns = ORDER_COLUMNS.join(', ');
    const values = ORDER_COLUMNS.map((c) => `@${c}`).join(', ');
    this.#insertOrder = db.prepare(`INSERT INTO orders (${columns}) VALUES (${values})`);
    this.#insertOrderIfNew = db.prepare(
      `INSERT INTO orders (${columns}) VALUES (${values}) ON CONFLICT (partner_ref) DO NOTHING`,
    );
    this.#updateOrder = db.prepare(
      `UPDATE orders SET ${ORDER_COLUMNS.map((c) => `${c} = @${c}`).join(', ')} WHERE id = @id`,
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
    const row = planLocalOrder(input, this.#rows.now(), {
      schedule: this.#schedule.settings,
      pace: this.#paceOf,
    });
    return this.#rows.write(this.#createTx, row);
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

    const current = this.#rows.find(fields.partner_ref, fields.invoice_number) ?? null;
    const plan = planApply({
      current,
      snapshot,
      fields,
      options,
      now,
      schedule: this.#schedule.settings,
      pace: this.#paceOf,
    });
    const { row } = plan;
    this.#append(plan.feed, now);
    if (plan.write === 'insert') row.id = Number(this.#insertOrder.run(row).lastInsertRowid);
    else if (plan.write === 'update') this.#updateOrder.run(row);
    this.#ledger.afterOrderWrite(current, row);
    this.#learnPace(plan.pace);
    this.#insertEvent.run(plan.event);
    const { changed, reason, created } = plan;
    return { order: toLocalOrder(row), changed, reason, duplicate: false, created };
  }

  #settleSubmission(ref: string, outcome: SubmissionOutcome): LocalOrder {
    const now = this.#rows.now();
    const plan = planSettlement(this.#rows.mustFind(ref), outcome, now);
    if (plan.update) {
      this.#append(plan.feed, now);
      this.#updateOrder.run(plan.row);
    }
    this.#insertEvent.run(plan.event);
    return toLocalOrder(plan.row);
  }

  #append(change: FeedChange | null, now: number): void {
    if (change) this.#feed.append(change.type, change.order, now);
  }

  /** Records a plan's pace samples (order-pace.ts), in the write's transaction. */
  #learnPace(samples: readonly PaceSample[]): void {
    const pace: OrderPace = this.#schedule.pace;
    for (const sample of samples) {
      if (sample.kind === 'delivery') pace.recordDelivery(sample.ms);
      else pace.recordStateReached(sample.productCode, sample.state, sample.ms);
    }
  }
}
