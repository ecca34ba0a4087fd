import type { EventReason, NewEventRow, OrderRow, SubmissionState } from '../store/local-order.js';
import { parseAttempts } from './attempt-records.js';
import { type FeedChange, publish } from './feed-change.js';
import { afterSubmissionOutcome } from './poll-rules.js';

/**
 * What the create call's outcomes without an order (rejected, blocked, unknown) and a cancel do
 * to an order, as pure functions of its row: no SQL. The store's `OrderWriter` (order-writer.ts)
 * finds the row, asks these for a plan and carries it out in one transaction.
 */

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
 * order), and of an attempt of the order that has ended (`endedAttempt`, its partner_ref:
 * `earlier_attempt`, recorded under that ref). Never touches `status`.
 */
export function planSettlement(
  current: OrderRow,
  outcome: SubmissionOutcome,
  now: number,
  { held = true, endedAttempt }: { held?: boolean; endedAttempt?: string } = {},
): SettlementPlan {
  const open = held && endedAttempt === undefined && OPEN_SUBMISSIONS.has(current.submission_state);
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
      partner_ref: endedAttempt ?? row.partner_ref,
      source: 'create',
      upstream:
        endedAttempt === undefined
          ? row.upstream
          : (parseAttempts(row.attempts).find((a) => a.partner_ref === endedAttempt)?.upstream ??
            row.upstream),
      event_id: null,
      status: null,
      payload: JSON.stringify(outcome),
      received_at: now,
      occurred_at: null,
      applied_at: now,
      changed: open ? 1 : 0,
      reason: open
        ? OUTCOME_REASON[outcome.state]
        : endedAttempt !== undefined
          ? 'earlier_attempt'
          : held
            ? 'submission_settled'
            : 'claim_lost',
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
      upstream: row.upstream,
      event_id: null,
      status: null,
      payload: JSON.stringify(cancellation),
      received_at: now,
      occurred_at: null,
      applied_at: now,
      changed: 1,
      reason: 'cancelled',
    },
  };
}
