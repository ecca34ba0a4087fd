import { type OrderRequest, orderRequestJson } from '../orders/order-request.js';
import { otherOrderReason, PARTNER_REF_REUSED } from '../orders/ref-reuse.js';
import type { EventReason, EventSource, NewEventRow, NewOrderRow, OrderRow } from '../store/local-order.js';
import { StoreError } from '../store/store-error.js';
import {
  DEFAULT_UPSTREAM,
  type Order,
  type OrderData,
  type OrderStatus,
  partnerRefProblem,
} from '../upstream/model.js';
import type { OrderSnapshot } from '../upstream/order-snapshot.js';
import { isEndedAttempt, type OrderRoute } from './attempts.js';
import { type FeedChange, publish } from './feed-change.js';
import { NO_SUBMISSION_OUTCOME, newOrderRow } from './new-order-row.js';
import { afterChange, afterSubmissionOutcome, type FirstPollLookup } from './poll-rules.js';
import { decideSnapshot, isFinalStatus, isKnownStatus } from './state-machine.js';
import { OPEN_SUBMISSIONS } from './submission-plan.js';

export type { FeedChange } from './feed-change.js';

/**
 * What an order write does, as pure functions of the order's row as it is, what arrived, the time
 * and each product's first poll: no SQL. The store's `OrderWriter` (order-writer.ts) finds the
 * row, asks these for a plan, and carries it out in one transaction: the feed event, the row, the
 * audit event. Every backend goes through the same plans, so the state machine's use, the merge,
 * the schedule and the feed event exist once.
 */

export interface CreateLocalOrderInput {
  /** The idempotency key sent upstream: 1 to 64 characters ({@link partnerRefProblem}). */
  partnerRef: string;
  productCode?: string;
  productId?: string;
  /** The target data sent upstream. */
  data: OrderData;
  callbackUrl?: string;
  /** The upstream to place it on (docs/upstreams.md). Default: `default`. */
  upstream?: string;
  /**
   * The order as the shop asked for it, kept to compare its repeats with. Default: the product,
   * data and callback URL above (they differ when the routed upstream names the product with
   * another code).
   */
  request?: OrderRequest;
  /**
   * The routing's choice (routing/route-order.ts): why `upstream`, and the candidates to go on to
   * after a definite non-fulfilment (domain/attempts.ts). Default: none (never fails over).
   */
  route?: OrderRoute;
  /**
   * The local catalog's name and price of the product when the order was taken, shown as its
   * `product_name` and `amount` until the upstream sends its own. Default: unknown (null).
   */
  catalog?: { name: string; price: number };
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
   * webhook's `created_at`): recorded with the event, the reconciler learns the upstream's pace
   * from it (reconciler/learn-pace.ts).
   */
  occurredAt?: number;
  /**
   * The upstream that said it: a webhook's is the upstream whose secret signed it, a create
   * answer's or a poll's the upstream of the client that called. A snapshot from another upstream
   * than the order's is recorded and never applied. Default: the default upstream.
   */
  upstream?: string;
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

/** Every column of `orders` that a write sets, in one order: the writer's SQL is built from it. */
export const ORDER_COLUMNS = [
  'partner_ref',
  'shop_ref',
  'upstream',
  'attempt',
  'attempts',
  'route',
  'invoice_number',
  'product_code',
  'product_id',
  'target_data',
  'callback_url',
  'request',
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
  'cancel_code',
  'cancel_detail',
  'first_sent_at',
  'create_in_doubt_at',
  'last_polled_at',
  'next_poll_at',
  'poll_count',
  'stuck_at',
  'final_at',
  'version',
] as const satisfies readonly (keyof OrderRow)[];

/**
 * The row of an order written before it is submitted upstream (submission `pending`, or `queued`
 * for the submission pump), scheduled like any new order. To be inserted unless its partner_ref
 * exists already. Throws `INVALID_PARTNER_REF` for a partner_ref the upstream would refuse.
 */
export function planLocalOrder(
  input: CreateLocalOrderInput,
  now: number,
  firstPolls: FirstPollLookup,
): NewOrderRow {
  const problem = partnerRefProblem(input.partnerRef);
  if (problem) throw new StoreError('INVALID_PARTNER_REF', problem);
  const row: NewOrderRow = {
    ...newOrderRow(
      input.partnerRef,
      input.upstream ?? DEFAULT_UPSTREAM,
      now,
      input.queued ? 'queued' : 'pending',
    ),
    route: input.route === undefined ? null : JSON.stringify(input.route),
    product_code: input.productCode ?? null,
    product_id: input.productId ?? null,
    product_name: input.catalog?.name ?? null,
    amount: input.catalog?.price ?? null,
    target_data: JSON.stringify(input.data),
    callback_url: input.callbackUrl ?? null,
    request: orderRequestJson(
      input.request ?? {
        ...(input.productCode === undefined ? {} : { product_code: input.productCode }),
        ...(input.productId === undefined ? {} : { product_id: input.productId }),
        data: input.data,
        ...(input.callbackUrl === undefined ? {} : { callback_url: input.callbackUrl }),
      },
    ),
  };
  return withPollingColumns(row, null, true, now, firstPolls);
}

export interface ApplyInput {
  /** The order the snapshot is of (by partner_ref, else invoice number), or null when none is known. */
  current: OrderRow | null;
  /** The snapshot as it arrived: the audit trail's payload unless `options.payload` is given. */
  snapshot: Order;
  /** The snapshot, read (`readOrderSnapshot`). */
  fields: OrderSnapshot;
  options: ApplyOptions;
  now: number;
  /** Each product's first-poll plan (store/poll-plans.ts). */
  firstPolls: FirstPollLookup;
  /**
   * The catalog's name of the product `current` asked for, when the catalog knows it: compared
   * with the snapshot's before the snapshot adopts an order not yet accepted ({@link mustAdopt}).
   */
  catalogName?: string | null;
}

export interface ApplyPlan {
  /** `insert` a new order (`row.id` is 0 until the database gives one), `update` it, or leave it. */
  write: 'insert' | 'update' | 'none';
  /** The order after the snapshot. */
  row: OrderRow;
  /** The feed event to append first, or null when a reader sees no change. */
  feed: FeedChange | null;
  /** The audit trail's row. */
  event: NewEventRow;
  /** True when the snapshot moved the order (or created it). */
  changed: boolean;
  reason: EventReason;
  /** True when the snapshot created the order. */
  created: boolean;
}

/**
 * What applying an upstream snapshot to `current` comes to (order-writer.ts, `applyOrderSnapshot`,
 * after the (source, eventId) duplicate check): decisions.md's state machine (`decideSnapshot`)
 * decides; the order is created from the snapshot when none is known, else merged
 * ({@link mergeSnapshot}); `final_at` and the schedule's columns follow ({@link afterChange}); the
 * version goes up and a feed event is due when the public representation changed
 * ({@link changeType}). Throws `INVALID_SNAPSHOT` when no order is
 * known and the snapshot has no partner_ref.
 */
export function planApply(input: ApplyInput): ApplyPlan {
  const { current, snapshot, fields, options, now, firstPolls } = input;
  let row: OrderRow;
  let write: ApplyPlan['write'];
  let feed: FeedChange | null;
  if (current === null && fields.partner_ref === null) {
    throw new StoreError(
      'INVALID_SNAPSHOT',
      `order ${fields.invoice_number} is unknown locally and its snapshot has no partner_ref: park the event`,
    );
  }
  if (current !== null && fields.partner_ref !== null && isEndedAttempt(current, fields.partner_ref)) {
    return planNotApplied(current, snapshot, fields, options, now, 'earlier_attempt');
  }
  if (current !== null && (options.upstream ?? DEFAULT_UPSTREAM) !== current.upstream) {
    return planNotApplied(current, snapshot, fields, options, now, 'wrong_upstream');
  }
  if (current !== null) {
    const otherOrder = mustAdopt(current, fields, input.catalogName ?? null);
    if (otherOrder !== null) return planOtherOrder(current, snapshot, fields, options, now, otherOrder);
  }
  const verdict = decideSnapshot(
    current === null
      ? { status: null, serial_number: null }
      : { status: current.status as OrderStatus | null, serial_number: current.serial_number },
    fields,
  );
  if (current === null) {
    row = withPollingColumns(
      newRowFrom(fields, options.upstream ?? DEFAULT_UPSTREAM, now),
      null,
      verdict.apply,
      now,
      firstPolls,
    );
    feed = publish(null, row, now);
    write = 'insert';
  } else {
    row = withPollingColumns(
      mergeSnapshot(current, fields, verdict),
      current,
      verdict.apply,
      now,
      firstPolls,
    );
    feed = publish(current, row, now);
    write = 'none';
    if (ORDER_COLUMNS.some((c) => row[c] !== current[c])) {
      row.updated_at = now;
      write = 'update';
    }
  }
  const created = current === null;
  const changed = created || verdict.apply;
  return {
    write,
    row,
    feed,
    event: snapshotEvent(row.partner_ref, snapshot, fields, options, now, changed, verdict.reason),
    changed,
    reason: verdict.reason,
    created,
  };
}

/** The audit trail's row of a snapshot: as it arrived (or `options.payload`), and what it did. */
function snapshotEvent(
  partnerRef: string,
  snapshot: Order,
  fields: OrderSnapshot,
  options: ApplyOptions,
  now: number,
  changed: boolean,
  reason: EventReason,
): NewEventRow {
  return {
    partner_ref: partnerRef,
    source: options.source,
    upstream: options.upstream ?? DEFAULT_UPSTREAM,
    event_id: options.eventId ?? null,
    status: fields.status,
    payload: JSON.stringify(options.payload ?? snapshot),
    received_at: options.receivedAt ?? now,
    occurred_at: options.occurredAt ?? null,
    applied_at: now,
    changed: changed ? 1 : 0,
    reason,
  };
}

/**
 * Whether a snapshot may adopt `current`: null when it may, else why it is another order's
 * (decisions.md, "Whose order is it"). An order the upstream has not yet been seen to accept
 * (queued, pending, unknown, blocked, rejected, cancelled) is adopted only by a snapshot that
 * matches what we sent (`otherOrderReason`: target, product name, creation time); one already
 * found to be another's (`PARTNER_REF_REUSED`) is never adopted. An accepted order, or one placed
 * elsewhere (no data of ours), takes any snapshot.
 */
function mustAdopt(current: OrderRow, fields: OrderSnapshot, catalogName: string | null): string | null {
  if (current.submission_state === 'accepted') return null;
  if (current.rejection_code === PARTNER_REF_REUSED) return 'its partner_ref names another order';
  if (current.target_data === null) return null;
  return otherOrderReason(
    {
      data: JSON.parse(current.target_data) as OrderData,
      productName: catalogName,
      firstSentAt: current.first_sent_at,
      neverSent:
        (current.submission_state === 'queued' || current.submission_state === 'cancelled') &&
        current.first_sent_at === null,
    },
    fields,
  );
}

/**
 * The plan of a snapshot that is not the order's to take, kept in the audit trail for the
 * operator and never applied: another upstream than the order's sent it (`wrong_upstream`: a
 * webhook signed by another supplier's secret), or it is of an attempt of the order that ended
 * (`earlier_attempt`: the order went on to another upstream since). Recorded under the
 * snapshot's own partner_ref when it has one, so each attempt's trail stays its own.
 */
function planNotApplied(
  current: OrderRow,
  snapshot: Order,
  fields: OrderSnapshot,
  options: ApplyOptions,
  now: number,
  reason: 'wrong_upstream' | 'earlier_attempt',
): ApplyPlan {
  const ref = reason === 'earlier_attempt' ? fields.partner_ref! : current.partner_ref;
  return {
    write: 'none',
    row: current,
    feed: null,
    event: snapshotEvent(ref, snapshot, fields, options, now, false, reason),
    changed: false,
    reason,
    created: false,
  };
}

/**
 * The plan of a snapshot of another order under our partner_ref: the order never takes its
 * fields. An open submission becomes `rejected` with `PARTNER_REF_REUSED`, a detail naming the fix
 * and the feed's `order.rejected`; a settled one (rejected, cancelled) stays as it is. The
 * snapshot is kept in the audit trail either way, for the operator.
 */
function planOtherOrder(
  current: OrderRow,
  snapshot: Order,
  fields: OrderSnapshot,
  options: ApplyOptions,
  now: number,
  reason: string,
): ApplyPlan {
  const row: OrderRow = { ...current };
  let feed: FeedChange | null = null;
  if (OPEN_SUBMISSIONS.has(current.submission_state)) {
    const invoice = fields.invoice_number === null ? '' : ` (invoice ${fields.invoice_number})`;
    Object.assign(row, {
      submission_state: 'rejected',
      rejection_code: PARTNER_REF_REUSED,
      rejection_detail:
        `the upstream already has another order under partner_ref ${current.partner_ref}${invoice}: ${reason}; ` +
        'nothing was placed for this one: place it again with a new partner_ref',
      blocked_code: null,
      blocked_detail: null,
      create_in_doubt_at: null,
      updated_at: now,
    });
    Object.assign(row, afterSubmissionOutcome(row, now));
    feed = publish(current, row, now);
  }
  const changed = row.submission_state !== current.submission_state;
  return {
    write: changed ? 'update' : 'none',
    row,
    feed,
    event: snapshotEvent(current.partner_ref, snapshot, fields, options, now, changed, 'partner_ref_reused'),
    changed,
    reason: 'partner_ref_reused',
    created: false,
  };
}

/** The order a snapshot creates: the upstream has it (submission `accepted`), with what it says. */
function newRowFrom(fields: OrderSnapshot, upstream: string, now: number): OrderRow {
  const row: OrderRow = { id: 0, ...newOrderRow(fields.partner_ref!, upstream, now, 'accepted') };
  for (const field of KEPT_FIELDS) (row[field] as unknown) = fields[field];
  row.status = isKnownStatus(fields.status) ? fields.status : null;
  row.upstream_status = fields.status;
  row.message = fields.message;
  return row;
}

/** The order after a snapshot, before scheduling. Any snapshot proves the upstream has it. */
export function mergeSnapshot(
  current: OrderRow,
  fields: OrderSnapshot,
  verdict: { apply: boolean; reason: string },
): OrderRow {
  const next: OrderRow = {
    ...current,
    submission_state: 'accepted',
    ...NO_SUBMISSION_OUTCOME,
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
 * The order after a write, on `next`, the plan's own new row: `final_at` the first time it is
 * final, then the schedule's columns.
 */
function withPollingColumns<R extends NewOrderRow>(
  next: R,
  current: OrderRow | null,
  changed: boolean,
  now: number,
  firstPolls: FirstPollLookup,
): R {
  if (next.status !== null && isFinalStatus(next.status)) next.final_at = current?.final_at ?? now;
  return Object.assign(next, afterChange(next, current, changed, now, firstPolls));
}
