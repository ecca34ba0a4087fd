import { orderRequestJson } from '../../orders/order-request.js';
import { type PublicOrder, samePublicOrder, toPublicOrder } from '../../orders/public-order.js';
import { otherOrderReason, PARTNER_REF_REUSED } from '../../orders/ref-reuse.js';
import {
  decideSnapshot,
  isFinalStatus,
  isKnownStatus,
  type Order,
  type OrderData,
  type OrderStatus,
  partnerRefProblem,
} from '../../upstream/model.js';
import type { OrderSnapshot } from '../../upstream/order-snapshot.js';
import { parseUpstreamTime } from '../../upstream/upstream-time.js';
import type { OrderEventType } from '../feed.js';
import type { EventReason, EventSource, OrderEventRow, OrderRow, SubmissionState } from '../local-order.js';
import { StoreError } from '../store-error.js';
import type { PaceState } from './pace-math.js';
import {
  afterChange,
  afterSubmissionOutcome,
  type PaceInput,
  type ScheduleRuleSettings,
} from './poll-rules.js';

/**
 * What an order write does, as pure functions of the order's row as it is, what arrived, the time,
 * the schedule's settings and the learned pace: no SQL. The store's `OrderWriter`
 * (order-writer.ts) finds the row, asks these for a plan, and carries it out in one transaction:
 * the feed event, the row, the audit event, the pace samples. Every backend goes through the same
 * plans, so the state machine's use, the merge, the schedule and the feed event exist once.
 */

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

/**
 * What the create call said, when it did not answer with an order. `inDoubt`: a create of the
 * order (this one or an earlier one) may have reached the upstream without a definite answer, so
 * the order may exist there (`create_in_doubt_at` stays set). A rejection is never in doubt: it
 * is final only when nothing was. `refusal`: the 4xx that an unknown outcome got after an
 * unanswered attempt, kept in the audit trail.
 */
export type SubmissionOutcome =
  | { state: 'rejected'; code: string; detail: string }
  | { state: 'blocked'; code: string; detail: string; inDoubt: boolean }
  | { state: 'unknown'; inDoubt: boolean; refusal?: { code: string; detail: string } };

/** A row of `orders` before the database gave it an id. */
export type NewOrderRow = Omit<OrderRow, 'id'>;
/** A row of `order_events` before the database gave it an id. */
export type NewEventRow = Omit<OrderEventRow, 'id'>;

/** The change feed's event of a write: appended in the write's transaction. */
export interface FeedChange {
  type: OrderEventType;
  /** The order's public representation after the write, at its new version. */
  order: PublicOrder;
}

/** A sample for the learned pace (order-pace.ts), recorded in the write's transaction. */
export type PaceSample =
  | { kind: 'delivery'; ms: number }
  | { kind: 'state'; productCode: string | null; state: PaceState; ms: number };

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

/** A new order that nothing is known of yet but its reference, submission state and time. */
function newOrderRow(partnerRef: string, now: number, submission: SubmissionState): NewOrderRow {
  return {
    partner_ref: partnerRef,
    invoice_number: null,
    product_code: null,
    product_id: null,
    target_data: null,
    callback_url: null,
    request: null,
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
    cancel_code: null,
    cancel_detail: null,
    first_sent_at: null,
    create_in_doubt_at: null,
    last_polled_at: null,
    next_poll_at: null,
    poll_count: 0,
    stuck_at: null,
    final_at: null,
    version: 0,
  };
}

/** What the schedule and the pace say, for the plans that schedule a poll. */
export interface ScheduleInput {
  schedule: ScheduleRuleSettings;
  pace: PaceInput;
}

/**
 * The row of an order written before it is submitted upstream (submission `pending`, or `queued`
 * for the submission pump), scheduled like any new order. To be inserted unless its partner_ref
 * exists already. Throws `INVALID_PARTNER_REF` for a partner_ref the upstream would refuse.
 */
export function planLocalOrder(
  input: CreateLocalOrderInput,
  now: number,
  { schedule, pace }: ScheduleInput,
): NewOrderRow {
  const problem = partnerRefProblem(input.partnerRef);
  if (problem) throw new StoreError('INVALID_PARTNER_REF', problem);
  const row: NewOrderRow = {
    ...newOrderRow(input.partnerRef, now, input.queued ? 'queued' : 'pending'),
    product_code: input.productCode ?? null,
    product_id: input.productId ?? null,
    target_data: JSON.stringify(input.data),
    callback_url: input.callbackUrl ?? null,
    request: orderRequestJson({
      ...(input.productCode === undefined ? {} : { product_code: input.productCode }),
      ...(input.productId === undefined ? {} : { product_id: input.productId }),
      data: input.data,
      ...(input.callbackUrl === undefined ? {} : { callback_url: input.callbackUrl }),
    }),
  };
  return withSchedule(row, null, true, now, schedule, pace);
}

export interface ApplyInput extends ScheduleInput {
  /** The order the snapshot is of (by partner_ref, else invoice number), or null when none is known. */
  current: OrderRow | null;
  /** The snapshot as it arrived: the audit trail's payload unless `options.payload` is given. */
  snapshot: Order;
  /** The snapshot, read (`readOrderSnapshot`). */
  fields: OrderSnapshot;
  options: ApplyOptions;
  now: number;
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
  /** Pace samples to record, in order. */
  pace: PaceSample[];
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
 * ({@link changeType}); and the pace learns from it. Throws `INVALID_SNAPSHOT` when no order is
 * known and the snapshot has no partner_ref.
 */
export function planApply(input: ApplyInput): ApplyPlan {
  const { current, snapshot, fields, options, now, schedule, pace } = input;
  let row: OrderRow;
  let write: ApplyPlan['write'];
  let feed: FeedChange | null;
  if (current === null && fields.partner_ref === null) {
    throw new StoreError(
      'INVALID_SNAPSHOT',
      `order ${fields.invoice_number} is unknown locally and its snapshot has no partner_ref: park the event`,
    );
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
    row = withSchedule(newRowFrom(fields, now), null, verdict.apply, now, schedule, pace);
    feed = publish(null, row, now);
    write = 'insert';
  } else {
    row = withSchedule(mergeSnapshot(current, fields, verdict), current, verdict.apply, now, schedule, pace);
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
    pace: paceSamples(row, current?.status ?? null, fields, verdict.apply, options),
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
    event_id: options.eventId ?? null,
    status: fields.status,
    payload: JSON.stringify(options.payload ?? snapshot),
    received_at: options.receivedAt ?? now,
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
    pace: [],
    changed,
    reason: 'partner_ref_reused',
    created: false,
  };
}

/**
 * What the upstream's pace learns from an applied event: the time from the order's upstream
 * creation to a new PROCESSING, SUCCESS or FAILED (SUCCESS by its `success_at`, the others by the
 * webhook's event time; a poll that finds them says nothing of when), once per order and state;
 * and, for a webhook, its delivery delay.
 */
export function paceSamples(
  row: Pick<OrderRow, 'status' | 'created_at' | 'product_code'>,
  previous: string | null,
  fields: Pick<OrderSnapshot, 'success_at'>,
  applied: boolean,
  options: Pick<ApplyOptions, 'occurredAt' | 'receivedAt' | 'source'>,
): PaceSample[] {
  const samples: PaceSample[] = [];
  const { occurredAt, receivedAt, source } = options;
  if (source === 'webhook' && occurredAt !== undefined && receivedAt !== undefined) {
    samples.push({ kind: 'delivery', ms: receivedAt - occurredAt });
  }
  const state = row.status;
  if (
    !applied ||
    state === previous ||
    (state !== 'PROCESSING' && state !== 'SUCCESS' && state !== 'FAILED')
  ) {
    return samples;
  }
  const reachedAt =
    state === 'SUCCESS' && fields.success_at !== null ? parseUpstreamTime(fields.success_at) : occurredAt;
  if (reachedAt === undefined || row.created_at === null) return samples;
  samples.push({
    kind: 'state',
    productCode: row.product_code,
    state,
    ms: reachedAt - parseUpstreamTime(row.created_at),
  });
  return samples;
}

/** The order a snapshot creates: the upstream has it (submission `accepted`), with what it says. */
function newRowFrom(fields: OrderSnapshot, now: number): OrderRow {
  const row: OrderRow = { id: 0, ...newOrderRow(fields.partner_ref!, now, 'accepted') };
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
    rejection_code: null,
    rejection_detail: null,
    blocked_code: null,
    blocked_detail: null,
    cancel_code: null,
    cancel_detail: null,
    create_in_doubt_at: null,
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
 * The change feed's part of a write (feed.ts), on `next`, the plan's own new row: when the
 * order's public representation changed (or a new order is known to the upstream), its version
 * goes up by one and the event of the change is returned, to be appended in the write's own
 * transaction. An order written locally before its submission has no event yet (version 0).
 */
function publish(current: OrderRow | null, next: NewOrderRow, now: number): FeedChange | null {
  const version = (current?.version ?? 0) + 1;
  const after = toPublicOrder({ ...next, version, updated_at: now });
  const type = changeType(current, next.submission_state, after);
  if (type === null) return null;
  next.version = version;
  next.updated_at = now;
  return { type, order: after };
}

/**
 * The order after a write, on `next`, the plan's own new row: `final_at` the first time it is
 * final, then the schedule's columns.
 */
function withSchedule<R extends NewOrderRow>(
  next: R,
  current: OrderRow | null,
  changed: boolean,
  now: number,
  schedule: ScheduleRuleSettings,
  pace: PaceInput,
): R {
  if (next.status !== null && isFinalStatus(next.status)) next.final_at = current?.final_at ?? now;
  return Object.assign(next, afterChange(schedule, next, current, changed, now, pace));
}

/**
 * The feed event of a write from `current` (null: a new row) to an order whose submission is
 * `submission` and whose public representation is `after`, or null when a reader sees no change.
 * The type says what changed: the upstream took the order (`order.submitted`), refused it
 * (`order.rejected`) or our configuration (`order.blocked`), the order was cancelled before it
 * was sent (`order.cancelled`); anything else, a status, a serial, an unknown submission, is
 * `order.updated`.
 */
export function changeType(
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
    if (submission === 'cancelled') return 'order.cancelled';
  }
  return 'order.updated';
}

/** Submissions a create outcome can still settle: the upstream has neither confirmed nor rejected them. */
export const OPEN_SUBMISSIONS: ReadonlySet<SubmissionState> = new Set([
  'queued',
  'pending',
  'unknown',
  'blocked',
]);

const OUTCOME_REASON: Record<SubmissionOutcome['state'], EventReason> = {
  rejected: 'rejected',
  unknown: 'submission_unknown',
  blocked: 'blocked',
};

export interface SettlementPlan {
  /** True when the row is to be written: the submission was still open. */
  update: boolean;
  /** The order after the outcome (as it was when the submission was settled already). */
  row: OrderRow;
  /** The feed event to append first, or null. */
  feed: FeedChange | null;
  /** The audit trail's row, written either way. */
  event: NewEventRow;
}

/**
 * What a create call's outcome without an order (rejected, blocked, unknown) does to `current`:
 * while its submission is open ({@link OPEN_SUBMISSIONS}) the submission takes the outcome, with
 * its code and detail, whether a create is still in doubt (`create_in_doubt_at`: kept from when
 * the call began, or cleared when nothing is), the next poll ({@link afterSubmissionOutcome}) and
 * the feed's event; once the upstream has confirmed or rejected the order, nothing changes but
 * the audit trail (`submission_settled`), and likewise for the outcome of a create whose claim
 * another process took since (`held` false: `claim_lost`; that process's create settles the
 * order). Never touches `status`.
 */
export function planSettlement(
  current: OrderRow,
  outcome: SubmissionOutcome,
  now: number,
  { held = true }: { held?: boolean } = {},
): SettlementPlan {
  const open = held && OPEN_SUBMISSIONS.has(current.submission_state);
  const row: OrderRow = { ...current };
  let feed: FeedChange | null = null;
  if (open) {
    const inDoubt = outcome.state !== 'rejected' && outcome.inDoubt;
    Object.assign(row, {
      submission_state: outcome.state,
      rejection_code: outcome.state === 'rejected' ? outcome.code : null,
      rejection_detail: outcome.state === 'rejected' ? outcome.detail : null,
      blocked_code: outcome.state === 'blocked' ? outcome.code : null,
      blocked_detail: outcome.state === 'blocked' ? outcome.detail : null,
      create_in_doubt_at: inDoubt ? (current.create_in_doubt_at ?? now) : null,
      updated_at: now,
    });
    Object.assign(row, afterSubmissionOutcome(row, now));
    feed = publish(current, row, now);
  }
  return {
    update: open,
    row,
    feed,
    event: {
      partner_ref: row.partner_ref,
      source: 'create',
      event_id: null,
      status: null,
      payload: JSON.stringify(outcome),
      received_at: now,
      applied_at: now,
      changed: open ? 1 : 0,
      reason: open ? OUTCOME_REASON[outcome.state] : held ? 'submission_settled' : 'claim_lost',
    },
  };
}

/** Why an order cannot be cancelled (see {@link whyNotCancellable}). */
export type NotCancellable = 'cancelled' | 'submitted';

/**
 * Null when `current` may be cancelled now, else why not: `cancelled` when it already is, and
 * `submitted` when its create was sent or is in flight: any submission but queued or blocked, a
 * blocked one whose earlier create may have reached the upstream (`create_in_doubt_at`), or one
 * claimed by a sender right now (a live lease: the pump's claim or the reconciler's). Cancelling
 * and claiming are written in transactions on the row, so never both.
 */
export function whyNotCancellable(
  current: Pick<OrderRow, 'submission_state' | 'create_in_doubt_at'> & { poll_leased_until: number | null },
  now: number,
): NotCancellable | null {
  if (current.submission_state === 'cancelled') return 'cancelled';
  if (current.submission_state !== 'queued' && current.submission_state !== 'blocked') return 'submitted';
  if (current.create_in_doubt_at !== null) return 'submitted';
  if (current.poll_leased_until !== null && current.poll_leased_until > now) return 'submitted';
  return null;
}

/** Who cancels: the shop (`CANCELLED`), or the worker for an order too old to send (`EXPIRED`). */
export interface Cancellation {
  code: 'CANCELLED' | 'EXPIRED';
  detail: string;
}

/**
 * What cancelling `current` writes once {@link whyNotCancellable} allows it: submission
 * `cancelled` with its code and detail, no next poll, the feed's `order.cancelled`, and the audit
 * row. It is never sent afterwards.
 */
export function planCancel(current: OrderRow, cancellation: Cancellation, now: number): SettlementPlan {
  const row: OrderRow = {
    ...current,
    submission_state: 'cancelled',
    cancel_code: cancellation.code,
    cancel_detail: cancellation.detail,
    blocked_code: null,
    blocked_detail: null,
    next_poll_at: null,
    updated_at: now,
  };
  return {
    update: true,
    row,
    feed: publish(current, row, now),
    event: {
      partner_ref: row.partner_ref,
      source: 'manual',
      event_id: null,
      status: null,
      payload: JSON.stringify(cancellation),
      received_at: now,
      applied_at: now,
      changed: 1,
      reason: 'cancelled',
    },
  };
}
