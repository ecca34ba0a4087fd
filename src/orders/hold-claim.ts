import type { ClaimedOrder, OrderClaims } from '../store/order-claims.js';

/**
 * The claim on an order is gone, or may run out before a request sent now would be answered:
 * the holder sends nothing more for it (another process may claim it and send it).
 */
export class ClaimLostError extends Error {
  override name = 'ClaimLostError';
  readonly code = 'CLAIM_LOST';
}

/** What work on a claimed order gets from {@link holdClaim}. */
export interface ClaimGuard {
  /** Aborted (with a {@link ClaimLostError}) once the claim is lost: stops a wait for a budget slot. */
  readonly signal: AbortSignal;
  /**
   * Throws a {@link ClaimLostError} unless the claim is still this holder's for at least half a
   * lease: call it right before sending anything for the order.
   */
  check(): void;
}

/**
 * Runs `work` on a claimed order (docs/reconciler.md, "Claims") while keeping the claim alive:
 * it is renewed every third of the lease, so a create that waits minutes for a budget slot keeps
 * its order, while the orders of a process that dies are free again within one lease. The
 * guard's `check()` refuses a send once the claim was taken by another process or is no longer
 * certain for half a lease (a renewal failed or was not answered): a request sent with at least
 * half a lease (22.5 s by default, more than the client's connect and answer time-outs, 20 s,
 * together: the configuration requires it) left ends before anybody else can
 * claim the order, so no two processes ever have a create of one order in flight. Does not end
 * the claim: the caller records or releases it.
 */
export async function holdClaim<T>(
  claims: OrderClaims,
  claimed: Pick<ClaimedOrder, 'partnerRef' | 'claim' | 'leasedUntil'>,
  work: (guard: ClaimGuard) => Promise<T>,
): Promise<T> {
  const { leaseMs } = claims.settings;
  const controller = new AbortController();
  let leasedUntil = claimed.leasedUntil;
  const lose = (why: string) => {
    if (!controller.signal.aborted) {
      controller.abort(new ClaimLostError(`the claim on order ${claimed.partnerRef} ${why}`));
    }
  };
  const uncertain = () => leasedUntil - claims.now() < leaseMs / 2;
  const check = () => {
    if (uncertain()) lose('may run out before an answer could come: its renewal failed or was not answered');
    controller.signal.throwIfAborted();
  };
  let renewing: Promise<void> | undefined;
  const renew = () => {
    renewing = claims
      .renewClaim(claimed.partnerRef, claimed.claim)
      .then(
        (until) => {
          if (until === undefined) lose('was taken by another process after it ran out');
          else leasedUntil = until;
        },
        // The store did not answer: the lease runs on, and `uncertain` stops sends in time.
        () => undefined,
      )
      .finally(() => {
        renewing = undefined;
      });
    return renewing;
  };
  // A claim taken a while ago (a poll that read 404 before its repeated create) is renewed first,
  // as the timer would have renewed it by now.
  if (leasedUntil - claims.now() < (leaseMs * 2) / 3) await renew();
  const timer = setInterval(() => {
    if (controller.signal.aborted) return;
    // Before the wait for an unanswered renewal: a renewal the store holds up (another process's
    // lock) must not keep a budget wait going past the point where nothing may be sent.
    if (uncertain()) return lose('may run out soon: its renewal failed or was not answered');
    if (!renewing) void renew();
  }, leaseMs / 3);
  try {
    return await work({ signal: controller.signal, check });
  } finally {
    clearInterval(timer);
    await renewing;
  }
}
