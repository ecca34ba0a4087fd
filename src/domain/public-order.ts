import type { OrderRow, SubmissionState } from '../store/local-order.js';
import type { OrderData, OrderStatus } from '../upstream/model.js';
import { parseAttempts, parseRoute } from './attempt-records.js';

/**
 * The one public representation of a local order (docs/api.md, "The order"): what the change
 * feed, the shop's notifications and the API carry. snake_case, the upstream's field names where
 * it has them, ours beside them; our times as ISO 8601 UTC. `version` counts the changes of this
 * representation: a reader that holds a higher version of an order can discard a lower one.
 */
export interface PublicOrder {
  /** The shop's partner_ref: the same whatever the attempts. */
  partner_ref: string;
  /** The upstream of the current (the latest) attempt. */
  upstream: string;
  /**
   * Each placement of the order on an upstream, oldest first, the current one last: an order is
   * placed on the next candidate only after a definite non-fulfilment (docs/upstreams.md).
   */
  attempts: PublicAttempt[];
  invoice_number: string | null;
  product_code: string | null;
  product_id: string | null;
  product_name: string | null;
  /** The target data sent with the create call; null for an order placed elsewhere. */
  data: OrderData | null;
  /** The upstream's rendering of the target, e.g. `12345678(2001)`. */
  target: string | null;
  nickname: string | null;
  amount: number | null;
  /** The status of decisions.md; null until the upstream confirmed one. */
  status: OrderStatus | null;
  /** The status string the upstream last sent, even one outside decisions.md's table. */
  upstream_status: string | null;
  serial_number: string | null;
  /** The upstream's reason on FAILED and REFUNDED. */
  message: string | null;
  /**
   * Where the create call stands: `queued` (waiting for its turn), `pending` (sent, not answered
   * yet), `accepted` (the upstream has the order), `rejected` (refused for good, see `rejection`),
   * `unknown` (no definite answer yet: the reconciler finds out), `blocked` (our configuration was
   * refused, see `blocked`; it is submitted again once fixed), `cancelled` (never sent, see
   * `cancellation`).
   */
  submission: SubmissionState;
  rejection: { code: string; detail: string } | null;
  blocked: { code: string; detail: string } | null;
  /** Why a `cancelled` order was: `CANCELLED` (the shop asked) or `EXPIRED` (it waited too long to be sent). */
  cancellation: { code: string; detail: string } | null;
  /**
   * Whether the order is done, in one field ({@link outcomeOf}): null while it is open, else
   * `delivered`, `failed`, `refunded`, `rejected` or `cancelled`. `delivered` can still become
   * `refunded` later; the shop is told when it does.
   */
  outcome: OrderOutcome | null;
  /** The upstream's creation and success times, as it sent them. */
  created_at: string | null;
  success_at: string | null;
  /** When the order was written here, when it last changed, when it first became final. */
  local_created_at: string;
  updated_at: string;
  final_at: string | null;
  version: number;
}

/** One attempt of an order (docs/upstreams.md, "What the shop sees"). */
export interface PublicAttempt {
  attempt: number;
  upstream: string;
  /** The partner_ref the upstream knows it by: the shop's on the first, `<shop ref>~<n>` after. */
  partner_ref: string;
  invoice_number: string | null;
  status: OrderStatus | null;
  submission: SubmissionState;
  /** Why this upstream was chosen, when the order was routed. */
  chosen: string | null;
  /** Why the attempt ended (`INSUFFICIENT_BALANCE`, `FAILED` …), null for the current one. */
  ended: { code: string; detail: string } | null;
}

/** How an order ended, for a shop that asks one question: is it done, and how? */
export const ORDER_OUTCOMES = ['delivered', 'failed', 'refunded', 'rejected', 'cancelled'] as const;
export type OrderOutcome = (typeof ORDER_OUTCOMES)[number];

/**
 * An order's outcome (docs/api.md, "The order"): `rejected` and `cancelled` from the submission
 * (the upstream never had the order), else from the upstream's final status: SUCCESS is
 * `delivered`, FAILED `failed`, REFUNDED `refunded`; null while the order is open (queued,
 * pending, unknown, blocked, PENDING, PROCESSING, or a status outside decisions.md's table).
 */
export function outcomeOf(submission: SubmissionState, status: string | null): OrderOutcome | null {
  if (submission === 'rejected' || submission === 'cancelled') return submission;
  if (status === 'SUCCESS') return 'delivered';
  if (status === 'FAILED') return 'failed';
  if (status === 'REFUNDED') return 'refunded';
  return null;
}

/** The columns of `orders` the public representation is made of. */
export type PublicOrderRow = Omit<
  OrderRow,
  'id' | 'last_polled_at' | 'next_poll_at' | 'poll_count' | 'stuck_at'
> & { version: number };

const iso = (ms: number) => new Date(ms).toISOString();
const isoOrNull = (ms: number | null) => (ms === null ? null : iso(ms));

/** The public representation of an order row. */
export function toPublicOrder(row: PublicOrderRow): PublicOrder {
  return {
    partner_ref: row.shop_ref,
    upstream: row.upstream,
    attempts: publicAttempts(row),
    invoice_number: row.invoice_number,
    product_code: row.product_code,
    product_id: row.product_id,
    product_name: row.product_name,
    data: row.target_data === null ? null : (JSON.parse(row.target_data) as OrderData),
    target: row.target,
    nickname: row.nickname,
    amount: row.amount,
    status: row.status as OrderStatus | null,
    upstream_status: row.upstream_status,
    serial_number: row.serial_number,
    message: row.message,
    submission: row.submission_state,
    rejection:
      row.rejection_code === null ? null : { code: row.rejection_code, detail: row.rejection_detail ?? '' },
    blocked: row.blocked_code === null ? null : { code: row.blocked_code, detail: row.blocked_detail ?? '' },
    cancellation:
      row.cancel_code === null ? null : { code: row.cancel_code, detail: row.cancel_detail ?? '' },
    outcome: outcomeOf(row.submission_state, row.status),
    created_at: row.created_at,
    success_at: row.success_at,
    local_created_at: iso(row.local_created_at),
    updated_at: iso(row.updated_at),
    final_at: isoOrNull(row.final_at),
    version: row.version,
  };
}

function publicAttempts(row: PublicOrderRow): PublicAttempt[] {
  const ended = parseAttempts(row.attempts).map(
    (a): PublicAttempt => ({
      attempt: a.attempt,
      upstream: a.upstream,
      partner_ref: a.partner_ref,
      invoice_number: a.invoice_number,
      status: a.status as OrderStatus | null,
      submission: a.submission,
      chosen: a.chosen,
      ended: a.ended,
    }),
  );
  return [
    ...ended,
    {
      attempt: row.attempt,
      upstream: row.upstream,
      partner_ref: row.partner_ref,
      invoice_number: row.invoice_number,
      status: row.status as OrderStatus | null,
      submission: row.submission_state,
      chosen: parseRoute(row.route)?.reason ?? null,
      ended: null,
    },
  ];
}

/** The fields whose change is a change of the order for a reader (not `updated_at`, not `version`). */
export function samePublicOrder(a: PublicOrder, b: PublicOrder): boolean {
  const { updated_at: _a, version: _av, ...restA } = a;
  const { updated_at: _b, version: _bv, ...restB } = b;
  return JSON.stringify(restA) === JSON.stringify(restB);
}
