import type { Logger } from 'pino';
import type { ClaimingStore } from '../store/order-store.js';
import type { UpstreamClient } from '../upstream/client.js';
import { sendClaimedOrder } from './place-order.js';

/** How often an idle pump looks for newly queued orders. */
export const DEFAULT_PUMP_IDLE_MS = 200;

/** How often the pump cancels the orders that waited longer than `maxAgeMs` (`expireWaitingOrders`). */
export const EXPIRY_SWEEP_MS = 5_000;

export interface SubmissionPumpOptions {
  store: ClaimingStore;
  client: UpstreamClient;
  logger?: Logger;
  /** How often an idle pump looks for queued orders. Default {@link DEFAULT_PUMP_IDLE_MS}. */
  idleMs?: number;
  /**
   * API_SUBMISSION_MAX_AGE_S in ms: an order still waiting to be sent (queued, or blocked with
   * nothing in doubt) this long after it was placed is cancelled with code `EXPIRED` instead,
   * within {@link EXPIRY_SWEEP_MS}, and a queued one is never sent once that old, unless a
   * create of it may have reached the upstream already (then it is sent again with its
   * partner_ref, which the upstream answers with the order it has). 0: never. Default: 0.
   */
  maxAgeMs?: number;
}

export interface SubmissionPump {
  /** Orders the pump has sent since it started, by outcome. */
  readonly sent: Record<'accepted' | 'rejected' | 'blocked' | 'unknown', number>;
  /** Stops after the submission in flight, if any. */
  stop(): Promise<void>;
}

/**
 * The submission pump (docs/api.md, "Placing orders"): sends the orders the shop API queued, one
 * at a time in arrival order, each with `sendClaimedOrder` (its own partner_ref, creation's share of
 * the rate budget: the client waits for a create slot), so a flash sale turns into a steady
 * stream at the budget's pace instead of 429s. Each order's outcome goes through the store like
 * any placement (accepted, rejected, blocked, unknown for the reconciler). While the reconciler's
 * circuit is open (a refused key, a wrong base URL, a failing upstream) the pump waits instead
 * of sending orders that would only be refused; orders that wait too long (`maxAgeMs`) are
 * cancelled meanwhile. The store is the queue: a claimed order is renewed while its create waits
 * (hold-claim.ts), and one whose pump died is taken again once its lease runs out.
 */
export function startSubmissionPump(options: SubmissionPumpOptions): SubmissionPump {
  const { store, client, logger } = options;
  const idleMs = options.idleMs ?? DEFAULT_PUMP_IDLE_MS;
  const maxAgeMs = options.maxAgeMs ?? 0;
  const sent = { accepted: 0, rejected: 0, blocked: 0, unknown: 0 };
  let stopping = false;
  let wake: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  let sweptAt = Number.NEGATIVE_INFINITY;
  const idle = () =>
    new Promise<void>((resolve) => {
      wake = resolve;
      timer = setTimeout(resolve, idleMs);
    });

  /**
   * Cancels the orders too old to send, at most every {@link EXPIRY_SWEEP_MS}: at the pump's
   * start, before anything is claimed, and again after a sweep the store could not take.
   */
  const expireOld = async () => {
    const now = store.claims.now();
    if (maxAgeMs === 0 || now - sweptAt < EXPIRY_SWEEP_MS) return;
    const expired = await store.writer.expireWaitingOrders(now - maxAgeMs);
    sweptAt = now;
    if (expired.length > 0) {
      logger?.warn(
        { partnerRefs: expired, maxAgeS: maxAgeMs / 1000 },
        `submission pump: ${expired.length} order(s) waited longer than API_SUBMISSION_MAX_AGE_S and were cancelled (EXPIRED), never sent`,
      );
    }
  };

  const loop = async () => {
    while (!stopping) {
      let order: Awaited<ReturnType<ClaimingStore['claims']['claimNextQueued']>>;
      // A sweep the store cannot take now never holds up sending: it is tried again next turn.
      await expireOld().catch((err: unknown) =>
        logger?.warn({ err }, 'submission pump: expiring old orders failed; trying again'),
      );
      try {
        order = (await store.circuit.state())
          ? undefined
          : await store.claims.claimNextQueued(
              maxAgeMs === 0 ? {} : { writtenSince: store.claims.now() - maxAgeMs },
            );
      } catch (err) {
        logger?.warn({ err }, 'submission pump: the store is busy; trying again');
        order = undefined;
      }
      if (!order) {
        await idle();
        continue;
      }
      try {
        const result = await sendClaimedOrder({ client, store, ...(logger ? { logger } : {}) }, order);
        sent[result.outcome] += 1;
      } catch (err) {
        // A store error (the create answer, if any, is then unknown to us): the order stays
        // queued, its create marked in doubt, and is sent again with its partner_ref, which the
        // upstream answers with the existing order. Not at once: a failing store would turn this
        // loop into a spin.
        logger?.error({ err, partnerRef: order.partnerRef }, 'submission pump: the order stays queued');
        await idle();
      }
      try {
        await store.claims.releaseClaim(order.partnerRef, order.claim);
      } catch {
        // The lease runs out on its own.
      }
    }
  };
  const running = loop();

  return {
    sent,
    async stop() {
      stopping = true;
      clearTimeout(timer);
      wake?.();
      await running;
    },
  };
}
