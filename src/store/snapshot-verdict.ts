import {
  ALLOWED_TRANSITIONS,
  decideTransition,
  isKnownStatus,
  ORDER_STATUSES,
  type OrderStatus,
  type StatusSnapshot,
  type TransitionVerdict,
} from '../upstream/model.js';

/** What applying a snapshot does to a local order, and why (see {@link decideSnapshot}). */
export type SnapshotVerdict = TransitionVerdict | { apply: true; reason: 'initial' };

/** Every status an order can reach from each status, through any number of allowed transitions. */
const REACHABLE: Readonly<Record<OrderStatus, ReadonlySet<OrderStatus>>> = Object.fromEntries(
  ORDER_STATUSES.map((from) => {
    const seen = new Set<OrderStatus>();
    const queue: OrderStatus[] = [...ALLOWED_TRANSITIONS[from]];
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      if (seen.has(next)) continue;
      seen.add(next);
      queue.push(...ALLOWED_TRANSITIONS[next]);
    }
    return [from, seen];
  }),
) as unknown as Record<OrderStatus, ReadonlySet<OrderStatus>>;

/**
 * Decides a snapshot against the local order with decisions.md's state machine
 * (`decideTransition`), plus two cases it leaves to the store:
 * - an order with no status yet (never confirmed) takes any known status: `initial`;
 * - a status reachable through allowed transitions, but not in one step (PENDING or PROCESSING
 *   to REFUNDED), is a newer state whose intermediate events are late or lost, not "an older
 *   state after a newer one": it applies as a `transition`. A snapshot is the whole order at that
 *   moment (success_at and serial included), and refusing it would lose a refund for good
 *   whenever it overtakes its SUCCESS webhook, since the order then settles at SUCCESS.
 */
export function decideSnapshot(
  current: { status: OrderStatus | null; serial_number: string | null },
  next: StatusSnapshot,
): SnapshotVerdict {
  if (current.status === null) {
    return isKnownStatus(next.status)
      ? { apply: true, reason: 'initial' }
      : { apply: false, reason: 'unknown_status' };
  }
  const verdict = decideTransition({ status: current.status, serial_number: current.serial_number }, next);
  if (verdict.reason === 'not_allowed' && REACHABLE[current.status].has(next.status as OrderStatus)) {
    return { apply: true, reason: 'transition' };
  }
  return verdict;
}
