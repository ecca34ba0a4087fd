import type { Logger } from 'pino';
import { Agent } from 'undici';
import { orderRefOf } from '../store/feed.js';
import type { DeliveryOutcome, NotifyDelivery } from '../store/notify-deliveries.js';
import type { NotifyEndpoint } from '../store/notify-endpoints.js';
import type { OutboxItem, Settlement } from '../store/notify-outbox.js';
import type { OrderStore } from '../store/order-store.js';
import { wantedTypes } from './event-filter.js';
import { createNotifyMetrics, GONE_REASON, type NotifyMetrics } from './notify-metrics.js';
import { notificationBody, notificationId, type PostResult, sendNotification } from './post-notification.js';
import { DEFAULT_NOTIFY_RETRY_S, retryDelayMs } from './retry-schedule.js';
import {
  DEFAULT_NOTIFY_CONCURRENCY,
  DEFAULT_NOTIFY_DISPATCH_EVERY_MS,
  DEFAULT_NOTIFY_TIMEOUT_MS,
} from './settings.js';

export interface NotifierOptions {
  /** The order store of the process: the feed, the endpoints, the outbox and the history. */
  store: Pick<OrderStore, 'feed' | 'endpoints' | 'outbox'>;
  /** Longest time one delivery may take. Default: {@link DEFAULT_NOTIFY_TIMEOUT_MS} (15 s). */
  timeoutMs?: number;
  /** Wait before each retry, ms; its length is the number of retries. Default: {@link DEFAULT_NOTIFY_RETRY_S}. */
  retryScheduleMs?: readonly number[];
  /**
   * Deliveries in flight at once, over every endpoint; with several endpoints one takes at most
   * all but one of them.
   * Default: {@link DEFAULT_NOTIFY_CONCURRENCY}.
   */
  concurrency?: number;
  /**
   * How often the outbox is looked at without being woken: retries coming due, an order's next
   * event after another host delivered the one before, a feed commit the wake-up could not see.
   * Default: {@link DEFAULT_NOTIFY_DISPATCH_EVERY_MS}.
   */
  dispatchEveryMs?: number;
  logger?: Logger;
  /** Clock of the attempts, ms. Default: `Date.now`. */
  now?: () => number;
}

export interface Notifier {
  readonly metrics: NotifyMetrics;
  /** Looks at the feed and the outbox now (after the look running, if any). */
  dispatchNow(): Promise<void>;
  /** Stops picking; waits for the deliveries in flight; `false` when it had to give up waiting. */
  close(options?: { timeoutMs?: number }): Promise<boolean>;
}

/**
 * Delivers the shop notifications from the outbox (docs/api.md, "Notifications"), in the worker
 * process; any number of processes may run one. A look runs when the feed has new commits
 * (`store.feed.watch`), when a delivery finishes, and on the timer; it is one transaction
 * (NotifyOutbox.turn) that writes what became of the deliveries that finished since the last
 * (a 2xx deletes the row, another answer or none schedules the next attempt, the last gives up,
 * a 410 disables the endpoint), adds every enabled endpoint's new events from the feed, and
 * leases what is due, as many as there is room for. Each leased notification is then signed with
 * its endpoint's secrets (two during a rotation) and POSTed with `timeoutMs`. The per-order order
 * and every retry live in the outbox (store/notify-outbox.ts), not here.
 */
export async function startNotifier(options: NotifierOptions): Promise<Notifier> {
  const { store, logger } = options;
  const timeoutMs = options.timeoutMs ?? DEFAULT_NOTIFY_TIMEOUT_MS;
  const scheduleMs = options.retryScheduleMs ?? DEFAULT_NOTIFY_RETRY_S.map((s) => s * 1000);
  const concurrency = options.concurrency ?? DEFAULT_NOTIFY_CONCURRENCY;
  const now = options.now ?? Date.now;
  // A sender that dies holds its rows this long: a delivery surely ended by then.
  const leaseMs = 2 * timeoutMs;
  const metrics = createNotifyMetrics(undefined, { endpoints: store.endpoints, outbox: store.outbox, now });
  const agent = new Agent({ connect: { timeout: timeoutMs } });
  const inFlight = new Set<Promise<void>>();
  /** Deliveries in flight per endpoint. */
  const busy = new Map<number, number>();
  /** What became of the deliveries that finished, written by the next look. */
  let settled: Settlement[] = [];
  let endpoints = new Map<number, NotifyEndpoint>();
  let closed = false;
  let looking: Promise<void> | undefined;
  let again = false;

  const settle = (
    item: OutboxItem,
    outcome: DeliveryOutcome,
    sent?: { requestedAt: number; answer: PostResult },
  ) => {
    const record: Omit<NotifyDelivery, 'id'> = {
      endpointId: item.endpointId,
      seq: item.seq,
      type: item.event?.type ?? 'unknown',
      partnerRef: (item.event && orderRefOf(item.event)) ?? null,
      attempt: item.attempt,
      requestedAt: sent?.requestedAt ?? now(),
      status: sent?.answer.status ?? null,
      durationMs: sent?.answer.durationMs ?? null,
      error: sent?.answer.error ?? (outcome === 'skipped' ? 'the event left the feed (retention)' : null),
      outcome,
    };
    settled.push(
      outcome === 'retrying'
        ? { item, record, outcome, nextAt: now() + retryDelayMs(item.attempt, scheduleMs) }
        : outcome === 'disabled'
          ? { item, record, outcome, reason: GONE_REASON }
          : { item, record, outcome: outcome as 'delivered' | 'gave_up' | 'skipped' },
    );
    metrics.countDelivery(outcome, record.durationMs);
  };

  const deliver = async (item: OutboxItem): Promise<void> => {
    const endpoint = endpoints.get(item.endpointId);
    if (!item.event || !endpoint) return settle(item, 'skipped');
    const requestedAt = now();
    const answer = await sendNotification(endpoint, notificationId(item.seq), notificationBody(item.event), {
      at: requestedAt,
      timeoutMs,
      dispatcher: agent,
    });
    const outcome: DeliveryOutcome =
      answer.status !== null && answer.status >= 200 && answer.status < 300
        ? 'delivered'
        : answer.status === 410
          ? 'disabled'
          : item.attempt > scheduleMs.length
            ? 'gave_up'
            : 'retrying';
    if (outcome === 'disabled')
      logger?.warn({ endpoint: endpoint.id, url: endpoint.url }, 'endpoint answered 410 Gone: disabled');
    settle(item, outcome, { requestedAt, answer });
  };

  const start = (item: OutboxItem) => {
    busy.set(item.endpointId, (busy.get(item.endpointId) ?? 0) + 1);
    const running: Promise<void> = deliver(item)
      .catch((err: unknown) =>
        // The row keeps its lease; once it runs out the notification is sent again.
        logger?.error(
          { err, endpoint: item.endpointId, seq: item.seq },
          'notification not sent; sent again later',
        ),
      )
      .finally(() => {
        inFlight.delete(running);
        busy.set(item.endpointId, busy.get(item.endpointId)! - 1);
        wake(); // its settlement to write, room for another, and the order's next event may go now
      });
    inFlight.add(running);
  };

  /**
   * Writes settlements apart, each on its own (a look that failed with them: one the store
   * refuses must not stop the others, nor every later look). One that fails still is sent again
   * once its lease runs out; when the store cannot be reached at all, the next look writes them.
   */
  const settleApart = async (batch: Settlement[]) => {
    const outcomes = await store.outbox.settleBatch(batch).catch(() => undefined);
    if (!outcomes) {
      settled.unshift(...batch);
      return;
    }
    outcomes.forEach((outcome, i) => {
      if (!outcome.ok) {
        const { endpointId, seq } = batch[i]!.item;
        logger?.error(
          { err: outcome.error, endpoint: endpointId, seq },
          'notification not settled; sent again later',
        );
      }
    });
  };

  /** One look: one transaction that settles, fills and leases (NotifyOutbox.turn); sends what it leased. */
  const look = async () => {
    endpoints = new Map((await store.endpoints.enabled()).map((endpoint) => [endpoint.id, endpoint]));
    // With several endpoints, one takes all slots but one: a shop that hangs never holds them all.
    const perEndpoint = endpoints.size > 1 ? Math.max(1, concurrency - 1) : concurrency;
    let free = closed ? 0 : concurrency - inFlight.size;
    const wanted = [...endpoints.values()].map((endpoint) => {
      const room = Math.max(0, Math.min(free, perEndpoint - (busy.get(endpoint.id) ?? 0)));
      free -= room;
      return { id: endpoint.id, cursor: endpoint.cursor, types: wantedTypes(endpoint.events), room };
    });
    const batch = settled;
    settled = [];
    try {
      const { picked, added, more } = await store.outbox.turn({ settled: batch, endpoints: wanted, leaseMs });
      metrics.countDispatched(added);
      for (const item of picked) start(item);
      if (more) again = true;
    } catch (err) {
      if (batch.length > 0) await settleApart(batch);
      throw err;
    }
  };

  /** Runs a look now, or once more after the one running: never two at once. */
  const wake = (): Promise<void> => {
    if (closed) return Promise.resolve();
    if (looking) {
      again = true;
      return looking;
    }
    looking = (async () => {
      do {
        again = false;
        try {
          await look();
        } catch (err) {
          logger?.warn({ err }, 'notifications: the store could not be reached; trying again');
        }
      } while (again && !closed);
    })().finally(() => {
      looking = undefined;
    });
    return looking;
  };

  const timer = setInterval(() => void wake(), options.dispatchEveryMs ?? DEFAULT_NOTIFY_DISPATCH_EVERY_MS);
  const stopWatching = await store.feed.watch(() => void wake());
  void wake();

  return {
    metrics,
    dispatchNow: () => wake(),
    async close({ timeoutMs: closeMs = timeoutMs + 1_000 } = {}) {
      closed = true;
      clearInterval(timer);
      await stopWatching();
      let timedOut: NodeJS.Timeout | undefined;
      // The look running may still start deliveries: wait for it before taking the ones in flight.
      const ended = (async () => Promise.all([await looking, ...inFlight]).then(() => true))();
      const finished = await Promise.race([
        ended,
        new Promise<boolean>((resolve) => {
          timedOut = setTimeout(() => resolve(false), closeMs);
        }),
      ]);
      clearTimeout(timedOut);
      const last = settled;
      settled = [];
      if (last.length > 0) await settleApart(last);
      // Deliveries still in flight past the wait are abandoned: their rows are sent again.
      await (finished ? agent.close() : agent.destroy()).catch(() => undefined);
      return finished;
    },
  };
}
