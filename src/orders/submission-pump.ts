import type { Logger } from 'pino';
import type { OrderStore } from '../store/order-store.js';
import type { UpstreamClient } from '../upstream/client.js';
import { resubmitOrder } from './place-order.js';

/** How often an idle pump looks for newly queued orders. */
export const DEFAULT_PUMP_IDLE_MS = 200;

export interface SubmissionPumpOptions {
  store: OrderStore;
  client: UpstreamClient;
  logger?: Logger;
  /** How often an idle pump looks for queued orders. Default {@link DEFAULT_PUMP_IDLE_MS}. */
  idleMs?: number;
}

export interface SubmissionPump {
  /** Orders the pump has sent since it started, by outcome. */
  readonly sent: Record<'accepted' | 'rejected' | 'blocked' | 'unknown', number>;
  /** Stops after the submission in flight, if any. */
  stop(): Promise<void>;
}

/**
 * The submission pump (docs/api.md, "Placing orders"): sends the orders the shop API queued, one
 * at a time in arrival order, each with `resubmitOrder` (its own partner_ref, creation's share of
 * the rate budget: the client waits for a create slot), so a flash sale turns into a steady
 * stream at the budget's pace instead of 429s. Each order's outcome goes through the store like
 * any placement (accepted, rejected, blocked, unknown for the reconciler). While the reconciler's
 * circuit is open (a refused key, a wrong base URL, a failing upstream) the pump waits instead
 * of sending orders that would only be refused. SQLite is the queue: a crash loses nothing, and a
 * claimed order whose pump died is taken again when its lease expires.
 */
export function startSubmissionPump(options: SubmissionPumpOptions): SubmissionPump {
  const { store, client, logger } = options;
  const idleMs = options.idleMs ?? DEFAULT_PUMP_IDLE_MS;
  const sent = { accepted: 0, rejected: 0, blocked: 0, unknown: 0 };
  let stopping = false;
  let wake: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  const idle = () =>
    new Promise<void>((resolve) => {
      wake = resolve;
      timer = setTimeout(resolve, idleMs);
    });

  const loop = async () => {
    while (!stopping) {
      let order: Awaited<ReturnType<OrderStore['schedule']['claimNextQueued']>>;
      try {
        order = (await store.circuit.state()) ? undefined : await store.schedule.claimNextQueued();
      } catch (err) {
        logger?.warn({ err }, 'submission pump: the store is busy; trying again');
        order = undefined;
      }
      if (!order) {
        await idle();
        continue;
      }
      try {
        const result = await resubmitOrder(
          { client, writer: store.writer, ...(logger ? { logger } : {}) },
          order,
        );
        sent[result.outcome] += 1;
      } catch (err) {
        // A store error (the create answer, if any, is then unknown to us): the order stays
        // queued and is sent again with its partner_ref, which the upstream answers with the
        // existing order. Not at once: a failing store would turn this loop into a spin.
        logger?.error({ err, partnerRef: order.partnerRef }, 'submission pump: the order stays queued');
        await idle();
      }
      try {
        await store.schedule.releasePollClaim(order.partnerRef);
      } catch {
        // The lease expires on its own.
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
