import type { Logger } from 'pino';
import type { ReconcilerSettings } from '../config/config.js';
import { sendClaimedOrder, type UnknownCause } from '../orders/place-order.js';
import { BudgetExhaustedError } from '../rate-budget/rate-budget.js';
import type { LocalOrder } from '../store/local-order.js';
import type { ClaimedOrder } from '../store/order-claims.js';
import type { ClaimingStore } from '../store/order-store.js';
import type { ApplyResult } from '../store/order-writer.js';
import { StoreError } from '../store/store-error.js';
import type { UpstreamClient } from '../upstream/client.js';
import { UpstreamError, UpstreamUnreachableError } from '../upstream/errors.js';
import type { Order } from '../upstream/model.js';
import type { PollOutcome, ReconcilerMetrics } from './metrics.js';

/** What polling needs; one set per process. */
export interface ReconcilerDeps {
  /**
   * Every answer goes through its writer; orders are claimed, and polls recorded, in its
   * claims, whose record of a poll also decides when the order is polled next.
   */
  store: ClaimingStore;
  /** The upstream client, with the shared rate budget: a poll takes a `poll` slot or ends the pass. */
  client: UpstreamClient;
  /** `reconcilerSettings(config)`, of which a pass reads its size. */
  settings: Pick<ReconcilerSettings, 'passSize'>;
  logger?: Logger;
  metrics?: ReconcilerMetrics;
  /** The clock, in ms; give the store the same one. Default: `Date.now`. */
  now?: () => number;
}

/**
 * Why a poll got no usable answer; the caller decides what happens to the order:
 * - `budget`: the poll share of the rate budget is spent (`retryAfterMs` says when a slot frees);
 *   the order keeps its place;
 * - `unauthorized`: 401/403, the key or the whitelist must be fixed; no further poll can
 *   succeed, so the circuit opens; the order keeps its place;
 * - `base_url`: a 404 of a route that always exists (`POST /orders` of a repeated create): H2H_BASE_URL
 *   is wrong; the circuit opens; the order keeps its place (its submission stays unknown);
 * - `rate_limited`: the upstream answered 429 although the budget allowed the call: the budget
 *   is out of step with the upstream's limit (another client on the same key?);
 * - `upstream_error`: 5xx, or a refusal that says nothing about our configuration (after the
 *   client's retries); the order goes on its own backoff;
 * - `unreachable`: no answer at all; the order goes on its own backoff;
 * - `claimed`: the order's claim ran out while its repeated create waited (another process may
 *   hold it now): the order is left to that process.
 */
export type PollStopReason =
  | 'budget'
  | 'unauthorized'
  | 'base_url'
  | 'rate_limited'
  | 'upstream_error'
  | 'unreachable'
  | 'claimed';

/** One line that says what went wrong and what to do, for logs, the CLI and the circuit. */
export interface PollError {
  code: string;
  message: string;
  fix?: string;
}

/** The result of polling one claimed order. */
export type PollResult =
  | {
      kind: 'polled';
      outcome: Extract<PollOutcome, 'changed' | 'unchanged' | 'resubmitted' | 'not_found' | 'invalid_answer'>;
      /** The order after the poll (and after any repeated create). */
      order: LocalOrder;
      /** The poll changed the order: a webhook was lost or late. */
      changed: boolean;
      /** A 404 for an order the upstream had confirmed. */
      anomaly: boolean;
      /** How many upstream calls the poll made (a repeated create adds one). */
      calls: number;
    }
  | {
      kind: 'kept';
      reason: PollStopReason;
      error: PollError;
      /** For `budget`: when a poll slot frees, in ms from now. */
      retryAfterMs?: number;
      /** Calls made before it failed (0 when the budget refused the first draw). */
      calls: number;
    };

/** One line that says what to do, for logs and the CLI. */
export function describePollError(error: Error): PollError {
  if (error instanceof UpstreamError || error instanceof UpstreamUnreachableError) {
    return { code: error.code, message: error.message, fix: error.fix };
  }
  if (error instanceof BudgetExhaustedError) return { code: error.code, message: error.message };
  const code = (error as { code?: unknown }).code;
  return { code: typeof code === 'string' ? code : 'ERROR', message: error.message };
}

/**
 * What a failed upstream call means for reconciliation; `not_found` is a 404 of
 * `GET /orders/:ref`, whatever its body says (the spec does not show it): "no such order".
 * The one place these rules live: polls, early polls and the circuit's probe use it.
 */
export function classifyFailure(error: unknown): {
  reason: Exclude<PollStopReason, 'claimed'> | 'not_found';
  retryAfterMs?: number;
  calls: number;
} {
  if (error instanceof BudgetExhaustedError) {
    // With a cause, the budget refused a retry after a failed attempt: one call was made.
    return { reason: 'budget', retryAfterMs: error.retryAfterMs, calls: error.cause === undefined ? 0 : 1 };
  }
  if (error instanceof UpstreamUnreachableError) return { reason: 'unreachable', calls: error.attempts };
  if (error instanceof UpstreamError) {
    if (error.configuration === 'credentials') return { reason: 'unauthorized', calls: error.attempts };
    if (error.configuration === 'base_url') return { reason: 'base_url', calls: error.attempts };
    if (error.status === 404) return { reason: 'not_found', calls: 1 };
    if (error.status === 429) {
      // Its Retry-After, else when the rate window can have room (docs/client.md, "429").
      return {
        reason: 'rate_limited',
        calls: error.attempts,
        ...(error.retryAfterMs === undefined ? {} : { retryAfterMs: error.retryAfterMs }),
      };
    }
    return { reason: 'upstream_error', calls: error.attempts };
  }
  return { reason: 'upstream_error', calls: 1 };
}

const KEPT_OUTCOME: Record<Exclude<PollStopReason, 'budget' | 'base_url' | 'claimed'>, PollOutcome> = {
  unauthorized: 'unauthorized',
  rate_limited: 'rate_limited',
  upstream_error: 'upstream_error',
  unreachable: 'unreachable',
};

/**
 * Repeats the create of an unresolved or blocked submission with its own partner_ref, through
 * `sendClaimedOrder`, the one create path, under the poll's claim. `calls` is what the poll spent
 * before (a read that answered 404, or nothing for a blocked order); `knownAbsent`: that read
 * answered 404, so no earlier create left an order upstream.
 */
async function submitAgain(
  deps: ReconcilerDeps,
  current: ClaimedOrder,
  calls: number,
  knownAbsent: boolean,
): Promise<PollResult> {
  const { store, client, logger, metrics } = deps;
  const ref = current.partnerRef;
  const result = await sendClaimedOrder({ client, store, ...(logger ? { logger } : {}) }, current, {
    knownAbsent,
  });
  if (result.outcome === 'unknown' && result.cause === 'claimed') {
    return { kind: 'kept', reason: 'claimed', error: { code: result.code, message: result.reason }, calls };
  }
  metrics?.countPoll('resubmitted');
  logger?.info(
    { partnerRef: ref, was: current.submissionState, outcome: result.outcome },
    current.submissionState === 'blocked'
      ? 'blocked order submitted again with the same partner_ref'
      : 'upstream had no order for an unresolved submission: create repeated with the same partner_ref',
  );
  if (result.outcome === 'blocked') {
    // Refused for our configuration again: every order would be. The writer has the order due.
    return {
      kind: 'kept',
      reason: 'unauthorized',
      error: {
        code: result.code,
        message: `POST /orders refused: ${result.code} (${result.detail})`,
        fix: result.fix,
      },
      calls: calls + 1,
    };
  }
  if (result.outcome === 'unknown' && result.cause !== 'refused_in_doubt') {
    // No definite answer to the create either: as for a poll without one, the caller decides.
    return {
      kind: 'kept',
      reason: RESUBMISSION_FAILURE[result.cause],
      error: { code: result.code, message: result.reason, fix: result.fix },
      calls: calls + 1,
    };
  }
  // Accepted, rejected, or refused after an attempt in doubt (unknown: read at the next poll).
  const order = await record(deps, current, result.order, true);
  return { kind: 'polled', outcome: 'resubmitted', order, changed: true, anomaly: false, calls: calls + 1 };
}

/** Options of {@link pollClaimedOrder}. */
export interface PollOptions {
  /**
   * An audit read of a settled order: drawn from the budget's `audit` priority (idle capacity
   * only, never waiting) and counted in `h2h_reconcile_audit_reads_total` instead of the polls.
   * Default: false.
   */
  audit?: boolean;
}

/** Where a read's outcome is counted: the polls, or the audit reads. */
function counterOf(deps: ReconcilerDeps, audit: boolean): (outcome: PollOutcome) => void {
  return (outcome) => (audit ? deps.metrics?.countAuditRead(outcome) : deps.metrics?.countPoll(outcome));
}

/** How a repeated create without a definite answer is handled, like a poll without one. */
const RESUBMISSION_FAILURE: Record<Exclude<UnknownCause, 'refused_in_doubt'>, PollStopReason> = {
  no_answer: 'unreachable',
  upstream_error: 'upstream_error',
  budget: 'budget',
  base_url: 'base_url',
  claimed: 'claimed',
};

/**
 * Polls one order that the caller has claimed (`claimDueForPoll` / `claimOrder`) and resolves
 * it, by the rules of docs/reconciler.md:
 * - `GET /orders/:partner_ref`, applied with `applyOrderSnapshot(…, { source: 'poll' })`, the
 *   one apply function of webhooks too; a pending or unknown submission is adopted by it;
 * - 404 for a pending or unknown submission → the create is repeated with the same partner_ref
 *   (spec §4 rule 7, through `sendClaimedOrder`), never under a new one;
 * - a blocked submission (refused for our configuration) → the create is repeated at once, with
 *   no read first: a 401 proves the upstream never took it (the pass probes before);
 * - 404 for an order the upstream had confirmed → an anomaly: logged at error, counted,
 *   polling goes on;
 * - then `recordPoll` with the next poll time of the backoff (or stuck), which ends the claim.
 *
 * When the poll gets no usable answer (budget spent, 401, 429, 5xx, no answer) it returns `kept`
 * and leaves the claim and the schedule as they are: the caller releases the claim (the order
 * keeps its place) or records the failure (`recordFailedPoll`: the order's own backoff). It
 * throws only what the store throws (SQLite trouble).
 */
export async function pollClaimedOrder(
  deps: ReconcilerDeps,
  claimed: ClaimedOrder,
  { audit = false }: PollOptions = {},
): Promise<PollResult> {
  const { store, client, logger, metrics } = deps;
  const ref = claimed.partnerRef;
  const count = counterOf(deps, audit);
  // Refused for our configuration: no read, the create goes again (with the same partner_ref,
  // so an earlier create in doubt is answered with its order, if it made one).
  if (claimed.submissionState === 'blocked') return submitAgain(deps, claimed, 0, false);

  let snapshot: Order;
  try {
    snapshot = await client.getOrder(ref, { priority: audit ? 'audit' : 'poll' });
  } catch (error) {
    const failure = classifyFailure(error);
    if (failure.reason === 'not_found') return notFound(deps, claimed, error as UpstreamError, count);
    const { reason, calls, retryAfterMs } = failure;
    if (reason !== 'budget' && reason !== 'base_url') {
      count(KEPT_OUTCOME[reason]);
      logger?.[reason === 'unauthorized' ? 'error' : 'warn'](
        { partnerRef: ref, err: error },
        `${audit ? 'audit read' : 'poll'} failed (${reason})`,
      );
    }
    return {
      kind: 'kept',
      reason,
      error: describePollError(error as Error),
      calls,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    };
  }

  let applied: ApplyResult;
  try {
    applied = await store.writer.applyOrderSnapshot(snapshot, {
      source: 'poll',
      upstream: store.claims.upstream,
    });
  } catch (error) {
    if (!(error instanceof StoreError && error.code === 'INVALID_SNAPSHOT')) throw error;
    count('invalid_answer');
    logger?.error({ partnerRef: ref, err: error }, 'poll answer cannot be applied; polling goes on');
    const order = await record(deps, claimed, claimed, false);
    return { kind: 'polled', outcome: 'invalid_answer', order, changed: false, anomaly: false, calls: 1 };
  }

  const order = await record(deps, claimed, applied.order, applied.changed);
  if (applied.changed) {
    metrics?.countChangedByPoll();
    count('changed');
    if (claimed.finalAt === null && order.finalAt !== null) metrics?.observeTimeToFinal(order, 'poll');
    const line = {
      partnerRef: ref,
      from: claimed.upstreamStatus,
      to: order.upstreamStatus,
      reason: applied.reason,
    };
    if (audit && order.status === 'REFUNDED') {
      metrics?.countAuditRefund();
      logger?.warn(line, 'the audit found a refund whose webhooks were all lost');
    } else {
      logger?.info(line, `${audit ? 'audit read' : 'poll'} changed the order: its webhook was lost or late`);
    }
  } else {
    count('unchanged');
  }
  return {
    kind: 'polled',
    outcome: applied.changed ? 'changed' : 'unchanged',
    order,
    changed: applied.changed,
    anomaly: false,
    calls: 1,
  };
}

/** Records the poll in the claims, which sets the next poll (or marks the order stuck); ends the claim. */
async function record(
  deps: ReconcilerDeps,
  claimed: ClaimedOrder,
  after: LocalOrder,
  changed: boolean,
): Promise<LocalOrder> {
  // Under the polled attempt's ref: when the answer ended it and the order went on to its next
  // upstream, the record changes nothing (that attempt is queued, neither polled nor claimed).
  const order = await deps.store.claims.recordPoll(claimed.partnerRef, { changed, claim: claimed.claim });
  if (order.stuckAt !== null && after.stuckAt === null && after.nextPollAt !== null) {
    deps.logger?.warn(
      {
        partnerRef: after.partnerRef,
        status: after.upstreamStatus,
        ageMs: order.stuckAt - after.localCreatedAt,
      },
      order.nextPollAt === null
        ? 'order marked stuck: SUCCESS still without a serial after the maximum age; no longer polled, a late serial still applies'
        : 'order marked stuck: no final state within the maximum age; still polled at the longest interval',
    );
  }
  return order;
}

async function notFound(
  deps: ReconcilerDeps,
  claimed: ClaimedOrder,
  error: UpstreamError,
  count: (outcome: PollOutcome) => void,
): Promise<PollResult> {
  const { store, logger, metrics } = deps;
  const ref = claimed.partnerRef;
  const found = await store.queries.getOrder(ref);
  if (found !== undefined && found.partnerRef !== ref) {
    // The polled attempt ended meanwhile and the order went on to another: nothing to resubmit.
    await store.claims.releaseClaim(ref, claimed.claim);
    count('not_found');
    return { kind: 'polled', outcome: 'not_found', order: found, changed: false, anomaly: false, calls: 1 };
  }
  const current = found ?? claimed;

  if (current.submissionState === 'pending' || current.submissionState === 'unknown') {
    // The create never reached the upstream (or its process died first): repeat it with the
    // same partner_ref (spec §4 rule 7), knowing no earlier create left an order there. The
    // upstream answers a repeat with the existing order.
    return submitAgain(deps, { ...claimed, ...current }, 1, true);
  }

  if (current.submissionState !== 'accepted') {
    // An early poll of an order the upstream never had, as expected: refused or cancelled, or
    // still queued, which the submission pump sends in its turn.
    await store.claims.releaseClaim(ref, claimed.claim);
    count('not_found');
    return { kind: 'polled', outcome: 'not_found', order: current, changed: false, anomaly: false, calls: 1 };
  }

  count('not_found');
  metrics?.countAnomaly('confirmed_order_not_found');
  logger?.error(
    { partnerRef: ref, invoice: current.invoiceNumber, status: current.upstreamStatus, err: error },
    'anomaly: the upstream answers 404 for an order it had confirmed; polling goes on — report it to the provider',
  );
  const order = await record(deps, claimed, current, false);
  return { kind: 'polled', outcome: 'not_found', order, changed: false, anomaly: true, calls: 1 };
}
