import type { NewOrderRow, OrderRow, SubmissionState } from '../store/local-order.js';
import { type PublicOrder, samePublicOrder, toPublicOrder } from './public-order.js';

/**
 * The change feed's part of an order write (feed.ts; docs/api.md, "The change feed"), as pure
 * functions of the row before and after: whether a reader sees a change, of which type, and the
 * order's new version. Every plan that writes an order (apply-plan.ts, submission-plan.ts) asks
 * {@link publish}.
 */

/** The order events of the change feed (docs/api.md, "The change feed"). */
export const ORDER_EVENT_TYPES = [
  'order.submitted',
  'order.updated',
  'order.rejected',
  'order.blocked',
  'order.cancelled',
] as const;
export type OrderEventType = (typeof ORDER_EVENT_TYPES)[number];

/** The change feed's event of a write: appended in the write's transaction. */
export interface FeedChange {
  type: OrderEventType;
  /** The order's public representation after the write, at its new version. */
  order: PublicOrder;
  /** The order's public `status` before the write (null for a new row, or one without a status). */
  previousStatus: PublicOrder['status'];
}

/**
 * The change feed's part of a write (feed.ts), on `next`, the plan's own new row: when the
 * order's public representation changed (or a new order is known to the upstream), its version
 * goes up by one and the event of the change is returned, to be appended in the write's own
 * transaction. An order written locally before its submission has no event yet (version 0).
 */
export function publish(current: OrderRow | null, next: NewOrderRow, now: number): FeedChange | null {
  const version = (current?.version ?? 0) + 1;
  const after = toPublicOrder({ ...next, version, updated_at: now });
  const type = changeType(current, next.submission_state, after);
  if (type === null) return null;
  next.version = version;
  next.updated_at = now;
  return { type, order: after, previousStatus: current === null ? null : toPublicOrder(current).status };
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
