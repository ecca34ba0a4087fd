import { ORDER_STATUSES, type OrderStatus } from '../upstream/model.js';

/**
 * The order state machine (docs/store.md, "Applying a snapshot"; docs/shop.md, "The order's
 * states"): which status changes an order
 * takes, whatever their source (a create answer, a webhook, a poll). The single source of these
 * rules; pure, like the rest of src/domain/.
 */

/** Statuses after which an order is settled. SUCCESS may still become REFUNDED. */
const FINAL: ReadonlySet<string> = new Set<OrderStatus>(['SUCCESS', 'FAILED', 'REFUNDED']);

/** The allowed status changes (besides SUCCESS→SUCCESS adding a serial number). */
export const ALLOWED_TRANSITIONS: Readonly<Record<OrderStatus, readonly OrderStatus[]>> = {
  PENDING: ['PROCESSING', 'SUCCESS', 'FAILED'],
  PROCESSING: ['SUCCESS', 'FAILED'],
  SUCCESS: ['REFUNDED'],
  FAILED: [],
  REFUNDED: [],
};

export function isKnownStatus(status: string): status is OrderStatus {
  return (ORDER_STATUSES as readonly string[]).includes(status);
}

/** Final per decisions.md; a status outside the table is never final. */
export function isFinalStatus(status: string): boolean {
  return FINAL.has(status);
}

/** What a snapshot's status and serial number are compared on. */
export interface StatusSnapshot {
  status: string;
  serial_number: string | null;
}

/** Why a snapshot changes an order, or why it does not. */
export type TransitionVerdict =
  | { apply: true; reason: 'transition' | 'serial_added' }
  | { apply: false; reason: 'duplicate' | 'not_allowed' | 'unknown_status' };

/**
 * Decides whether an order at `current` moves to `next` (decisions.md, "Allowed transitions").
 * Anything not allowed (an older state after a newer one, FAILED after SUCCESS, a status outside
 * the table) leaves the order as it is; the caller still records the event.
 */
export function decideTransition(current: StatusSnapshot, next: StatusSnapshot): TransitionVerdict {
  if (!isKnownStatus(next.status)) return { apply: false, reason: 'unknown_status' };
  if (current.status === next.status) {
    if (next.status === 'SUCCESS' && next.serial_number && !current.serial_number) {
      return { apply: true, reason: 'serial_added' };
    }
    return { apply: false, reason: 'duplicate' };
  }
  // An order whose status we only know as an unknown string may move to any known status.
  if (!isKnownStatus(current.status)) return { apply: true, reason: 'transition' };
  return ALLOWED_TRANSITIONS[current.status].includes(next.status)
    ? { apply: true, reason: 'transition' }
    : { apply: false, reason: 'not_allowed' };
}

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
 * Decides whether a whole order snapshot (a create answer, a webhook, a poll) moves the local
 * order. It is {@link decideTransition} with two additions for snapshots:
 * - an order with no status yet (never confirmed) takes any known status: `initial`;
 * - a status reachable through allowed transitions but not in one step (PENDING or PROCESSING
 *   to REFUNDED) is a newer state whose intermediate events are late or lost, not "an older state
 *   after a newer one": it applies as a `transition`. A snapshot is the whole order at that moment,
 *   and a poll only ever sees the current state, so refusing it would lose a refund for good
 *   whenever it overtakes its SUCCESS webhook. (docs/store.md, "Applying a snapshot")
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
