import type { LocalOrder } from '../store/local-order.js';
import type { Order } from '../upstream/model.js';
import {
  classifyFailure,
  describePollError,
  type PollError,
  type PollResult,
  pollClaimedOrder,
  type ReconcilerDeps,
} from './poll-order.js';

/** What an early poll of one order came to. */
export type EarlyPollResult =
  | Extract<PollResult, { kind: 'polled' }>
  | {
      /** Another poller holds the order right now: its answer is on the way. */
      kind: 'busy';
      order: LocalOrder;
    }
  | {
      /** The order is another upstream's: this reconciler's client does not call about it. */
      kind: 'other_upstream';
      order: LocalOrder;
    }
  | {
      /** Unknown locally, and the upstream answers 404 for it too. */
      kind: 'unknown_order';
    }
  | {
      /** The poll could not be made or answered; the order keeps its place in the schedule. */
      kind: 'kept';
      reason: Extract<PollResult, { kind: 'kept' }>['reason'];
      error: PollError;
      retryAfterMs?: number;
    };

/**
 * Polls one order now, ahead of its schedule: a stale but authentic webhook named it, or a user
 * asked (`h2h-sync order show REF --refresh`). `ref` is a partner_ref or an invoice number.
 *
 * A local order is claimed first (`claimOrder`), settled ones too (a stale webhook may carry a
 * refund), so it is never polled twice at once; it is then polled and resolved exactly as in a
 * pass. An order unknown locally (placed elsewhere) is read from the upstream and, if it exists,
 * stored through the same apply function. Takes a `poll` slot of the budget, never waits for one.
 */
export async function pollOrderNow(deps: ReconcilerDeps, ref: string): Promise<EarlyPollResult> {
  const { store } = deps;
  const claim = await store.claims.claimOrder(ref);
  if (claim && !claim.claimed) {
    return claim.order.upstream === store.claims.upstream
      ? { kind: 'busy', order: claim.order }
      : { kind: 'other_upstream', order: claim.order };
  }
  if (claim) {
    const result = await pollClaimedOrder(deps, claim.order);
    if (result.kind === 'polled') return result;
    await store.claims.releaseClaim(claim.order.partnerRef, claim.order.claim);
    return kept(result.reason, result.error, result.retryAfterMs);
  }
  return pollUnknownOrder(deps, ref);
}

function kept(
  reason: Extract<PollResult, { kind: 'kept' }>['reason'],
  error: PollError,
  retryAfterMs?: number,
): EarlyPollResult {
  return { kind: 'kept', reason, error, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
}

async function pollUnknownOrder(deps: ReconcilerDeps, ref: string): Promise<EarlyPollResult> {
  const { store, client, logger, metrics } = deps;
  let snapshot: Order;
  try {
    snapshot = await client.getOrder(ref);
  } catch (error) {
    const { reason, retryAfterMs } = classifyFailure(error);
    if (reason === 'not_found') {
      metrics?.countPoll('not_found');
      logger?.warn({ ref }, 'early poll: no such order locally or upstream');
      return { kind: 'unknown_order' };
    }
    if (reason !== 'budget' && reason !== 'base_url') metrics?.countPoll(reason);
    return kept(reason, describePollError(error as Error), retryAfterMs);
  }
  const applied = await store.writer.applyOrderSnapshot(snapshot, {
    source: 'poll',
    upstream: store.claims.upstream,
  });
  metrics?.countPoll(applied.changed ? 'changed' : 'unchanged');
  logger?.info({ ref, partnerRef: applied.order.partnerRef }, 'early poll stored an order placed elsewhere');
  return {
    kind: 'polled',
    outcome: applied.changed ? 'changed' : 'unchanged',
    order: applied.order,
    changed: applied.changed,
    anomaly: false,
    calls: 1,
  };
}
