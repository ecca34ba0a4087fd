import { type EndedAttempt, type OrderRoute, parseAttempts, parseRoute } from '../domain/attempt-records.js';
import { isKnownStatus } from '../domain/state-machine.js';
import { type OrderRequest, parseOrderRequest } from '../orders/order-request.js';
import type { OrderData, OrderStatus } from '../upstream/model.js';

/**
 * Where the create call of an order stands, apart from the order's status:
 * - `queued`: accepted by the shop API and waiting for its turn: the submission pump sends
 *   queued orders in arrival order as the rate budget allows (never polled meanwhile);
 * - `pending`: written locally, the create call has not answered yet;
 * - `accepted`: the upstream has the order (any snapshot of it proves that);
 * - `rejected`: the upstream refused the order itself (an order-specific 400); see
 *   `rejectionCode`; never retried;
 * - `unknown`: the create call got no definite answer; the reconciler must find out;
 * - `blocked`: the upstream refused our configuration (401/403: the key, H2H access, the IP
 *   whitelist; see `blockedCode`); the reconciler submits it again with its partner_ref once a
 *   probe shows the configuration works;
 * - `cancelled`: never sent, or refused before any create could have reached the upstream, and
 *   cancelled by the shop or expired in the queue (see `cancelCode`); never sent again.
 */
export const SUBMISSION_STATES = [
  'queued',
  'pending',
  'accepted',
  'rejected',
  'unknown',
  'blocked',
  'cancelled',
] as const;
export type SubmissionState = (typeof SUBMISSION_STATES)[number];

/** Who delivered an event. */
export const EVENT_SOURCES = ['create', 'webhook', 'poll', 'manual'] as const;
export type EventSource = (typeof EVENT_SOURCES)[number];

/**
 * Why an event changed an order, or why it did not. The transition verdicts come from
 * `decideTransition`; the store adds:
 * - `initial`: the first known status of an order;
 * - `duplicate_event`: the (source, event id) was applied before (returned, never recorded);
 * - `rejected`, `submission_unknown`, `blocked`: what the create call said, recorded by
 *   `markRejected`, `markSubmissionUnknown` and `markBlocked`;
 * - `submission_settled`: such a create outcome arrived after the submission was settled
 *   (accepted or rejected) and changed nothing;
 * - `claim_lost`: a create outcome from a sender whose claim another process took since: changed
 *   nothing (that process's create settles the order);
 * - `partner_ref_reused`: the upstream answered with another order under our partner_ref (its
 *   target, product or creation time is not ours): recorded, never applied;
 * - `wrong_upstream`: a webhook signed by another upstream than the order's: recorded, never
 *   applied (docs/upstreams.md, "Webhooks");
 * - `earlier_attempt`: a snapshot of an attempt of the order that has ended (the order went on
 *   to another upstream): recorded, never applied;
 * - `cancelled`: the shop cancelled the order, or it expired in the queue, before it was sent.
 */
export type EventReason =
  | 'initial'
  | 'transition'
  | 'serial_added'
  | 'duplicate'
  | 'not_allowed'
  | 'unknown_status'
  | 'duplicate_event'
  | 'rejected'
  | 'submission_unknown'
  | 'blocked'
  | 'submission_settled'
  | 'claim_lost'
  | 'partner_ref_reused'
  | 'wrong_upstream'
  | 'earlier_attempt'
  | 'cancelled';

/** An order as the store keeps it. Times we set are ms since the epoch; upstream times are ISO. */
export interface LocalOrder {
  id: number;
  /** The current attempt's partner_ref: the one the upstream knows (docs/upstreams.md). */
  partnerRef: string;
  /** The shop's partner_ref, the same for every attempt (equal to `partnerRef` on the first). */
  shopRef: string;
  /** The upstream the current attempt is placed on (docs/upstreams.md); `default` with a single upstream. */
  upstream: string;
  /** The current attempt's number, from 1. */
  attempt: number;
  /** The attempts that ended before the current one, oldest first. */
  endedAttempts: EndedAttempt[];
  /** Why the current upstream was chosen and the candidates left; null for an order not routed. */
  route: OrderRoute | null;
  invoiceNumber: string | null;
  productCode: string | null;
  productId: string | null;
  /** The target data we sent; null for an order placed elsewhere. */
  data: OrderData | null;
  callbackUrl: string | null;
  /**
   * The order as the shop (or the CLI) asked for it, kept as sent: what an idempotent repeat is
   * compared with. Null for an order placed elsewhere, or written before the store kept it.
   */
  request: OrderRequest | null;
  amount: number | null;
  /** The last applied status; null until the upstream confirmed a known status. */
  status: OrderStatus | null;
  /** The status string as last applied, or as received when outside decisions.md's table. */
  upstreamStatus: string | null;
  serialNumber: string | null;
  nickname: string | null;
  message: string | null;
  target: string | null;
  productName: string | null;
  /** The upstream's creation time (ISO 8601), once known. */
  createdAt: string | null;
  successAt: string | null;
  localCreatedAt: number;
  updatedAt: number;
  submissionState: SubmissionState;
  rejectionCode: string | null;
  rejectionDetail: string | null;
  /** For a `blocked` submission: the upstream's code (INVALID_API_KEY …) and detail (for IP_NOT_WHITELISTED the IP). */
  blockedCode: string | null;
  blockedDetail: string | null;
  /** For a `cancelled` submission: `CANCELLED` (by the shop) or `EXPIRED` (too old to send), and why. */
  cancelCode: string | null;
  cancelDetail: string | null;
  /** When the first create of the order was sent (about to be), in ms; null while never sent. */
  firstSentAt: number | null;
  /**
   * Since when a create of this order may have reached the upstream without a definite answer
   * (no answer, a 5xx, an unreadable 2xx, or a sender that died): until a snapshot, a definite
   * refusal of every attempt or a 404 read settles it, a 4xx is not a rejection and the order
   * cannot be cancelled. Null when nothing is in doubt.
   */
  createInDoubtAt: number | null;
  lastPolledAt: number | null;
  /** When the reconciler should look at the order next; null when there is nothing to poll. */
  nextPollAt: number | null;
  pollCount: number;
  /** When the reconciler gave up waiting and marked the order stuck (it keeps polling). */
  stuckAt: number | null;
  /** When the order first reached a final status. */
  finalAt: number | null;
  /** Changes of the order's public representation so far (docs/api.md): 0 until its first event. */
  version: number;
}

/** One row of the audit trail. */
export interface OrderEvent {
  id: number;
  partnerRef: string;
  source: EventSource;
  /** The upstream that said it: the event id is that upstream's (docs/upstreams.md). */
  upstream: string;
  eventId: string | null;
  /** The status as received; null for create outcomes without an order (rejected, unknown). */
  status: string | null;
  payload: unknown;
  receivedAt: number;
  appliedAt: number;
  changed: boolean;
  reason: EventReason;
}

/** A row of `orders` exactly as SQLite returns it. */
export interface OrderRow {
  id: number;
  /** The current attempt's partner_ref, sent to the upstream (domain/attempts.ts). */
  partner_ref: string;
  /** The shop's partner_ref: the first attempt's, unchanged by the later ones. */
  shop_ref: string;
  upstream: string;
  /** The current attempt's number, from 1. */
  attempt: number;
  /** The ended attempts (JSON `EndedAttempt[]`), null while there were none. */
  attempts: string | null;
  /** The routing's choice and the candidates left (JSON `OrderRoute`), null for an order not routed. */
  route: string | null;
  invoice_number: string | null;
  product_code: string | null;
  product_id: string | null;
  target_data: string | null;
  callback_url: string | null;
  request: string | null;
  amount: number | null;
  status: string | null;
  upstream_status: string | null;
  serial_number: string | null;
  nickname: string | null;
  message: string | null;
  target: string | null;
  product_name: string | null;
  created_at: string | null;
  success_at: string | null;
  local_created_at: number;
  updated_at: number;
  submission_state: SubmissionState;
  rejection_code: string | null;
  rejection_detail: string | null;
  blocked_code: string | null;
  blocked_detail: string | null;
  cancel_code: string | null;
  cancel_detail: string | null;
  first_sent_at: number | null;
  create_in_doubt_at: number | null;
  last_polled_at: number | null;
  next_poll_at: number | null;
  poll_count: number;
  stuck_at: number | null;
  final_at: number | null;
  version: number;
}

/** A row of `orders` before the database gave it an id. */
export type NewOrderRow = Omit<OrderRow, 'id'>;

/** A row of `order_events` exactly as SQLite returns it. */
export interface OrderEventRow {
  id: number;
  partner_ref: string;
  source: EventSource;
  /**
   * The upstream that said it (a webhook's: the one whose secret signed it; a create outcome's or
   * a cancel's: the order's), migration 23; an event id is unique per (source, upstream).
   */
  upstream: string;
  event_id: string | null;
  status: string | null;
  payload: string | null;
  received_at: number;
  /** When the upstream says the event happened (a webhook's `created_at`), in ms; else null (migration 19). */
  occurred_at: number | null;
  applied_at: number;
  changed: number;
  reason: EventReason;
}

/** A row of `order_events` before the database gave it an id. */
export type NewEventRow = Omit<OrderEventRow, 'id'>;

export function toLocalOrder(row: OrderRow): LocalOrder {
  return {
    id: row.id,
    partnerRef: row.partner_ref,
    shopRef: row.shop_ref,
    upstream: row.upstream,
    attempt: row.attempt,
    endedAttempts: parseAttempts(row.attempts),
    route: parseRoute(row.route),
    invoiceNumber: row.invoice_number,
    productCode: row.product_code,
    productId: row.product_id,
    data: row.target_data === null ? null : (JSON.parse(row.target_data) as OrderData),
    callbackUrl: row.callback_url,
    request: row.request === null ? null : parseOrderRequest(row.request),
    amount: row.amount,
    status: row.status !== null && isKnownStatus(row.status) ? row.status : null,
    upstreamStatus: row.upstream_status,
    serialNumber: row.serial_number,
    nickname: row.nickname,
    message: row.message,
    target: row.target,
    productName: row.product_name,
    createdAt: row.created_at,
    successAt: row.success_at,
    localCreatedAt: row.local_created_at,
    updatedAt: row.updated_at,
    submissionState: row.submission_state,
    rejectionCode: row.rejection_code,
    rejectionDetail: row.rejection_detail,
    blockedCode: row.blocked_code,
    blockedDetail: row.blocked_detail,
    cancelCode: row.cancel_code,
    cancelDetail: row.cancel_detail,
    firstSentAt: row.first_sent_at,
    createInDoubtAt: row.create_in_doubt_at,
    lastPolledAt: row.last_polled_at,
    nextPollAt: row.next_poll_at,
    pollCount: row.poll_count,
    stuckAt: row.stuck_at,
    finalAt: row.final_at,
    version: row.version,
  };
}

export function toOrderEvent(row: OrderEventRow): OrderEvent {
  return {
    id: row.id,
    partnerRef: row.partner_ref,
    source: row.source,
    upstream: row.upstream,
    eventId: row.event_id,
    status: row.status,
    payload: row.payload === null ? null : JSON.parse(row.payload),
    receivedAt: row.received_at,
    appliedAt: row.applied_at,
    changed: row.changed === 1,
    reason: row.reason,
  };
}
