import { Queue, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { Agent } from 'undici';
import { DEFAULT_QUEUE_PREFIX } from '../queue/webhook-queue.js';
import { type HeldPassLock, PassLock } from '../reconciler/pass-lock.js';
import { settlesWithin } from '../shared/deadline.js';
import { watchedRedis } from '../shared/redis-outage.js';
import { type NotifyDelivery, SETTLED_OUTCOMES } from '../store/notify-deliveries.js';
import type { OrderStore } from '../store/order-store.js';
import { DEFAULT_STORE_LOCK_WAIT_MS } from '../worker/event-worker.js';
import { GroupCommit } from '../worker/group-commit.js';
import { type DeliverResult, deliverNotification, releaseSuccessor } from './deliver-notification.js';
import { DeliveredRecords } from './delivered-records.js';
import { DeliveryHints } from './delivery-hints.js';
import { DirectDeliveries } from './direct-delivery.js';
import { type DispatchMemory, dispatchNotifications, durableCursor } from './dispatcher.js';
import { createNotifyMetrics, type NotifyMetrics } from './notify-metrics.js';
import { NOTIFY_QUEUE, type NotifyJobData } from './notify-queue.js';
import { RunningDeliveries, WaitMarks } from './order-wait.js';
import { recordParkedJob, sweepParkedJobs } from './parked-jobs.js';
import { DEFAULT_NOTIFY_TIMEOUT_MS, postNotification } from './post-notification.js';
import { DEFAULT_NOTIFY_RETRY_S, notifyBackoff } from './retry-schedule.js';

/** Default of {@link NotifierOptions.concurrency}. */
export const DEFAULT_NOTIFY_CONCURRENCY = 20;
/** Default of {@link NotifierOptions.dispatchEveryMs}. */
export const DEFAULT_NOTIFY_DISPATCH_EVERY_MS = 20;

/**
 * Times a notification job may stall (its worker died mid-delivery) and be taken over. Higher
 * than BullMQ's 1: a delivery taken over is sent again, which receivers dedupe on `webhook-id`,
 * whereas a job parked for stalling would not be retried on the schedule.
 */
export const NOTIFY_MAX_STALLED_COUNT = 10;

/**
 * Delivered attempts whose records a notifier may have unwritten at once before a delivery waits
 * for its own (src/notify/delivered-records.ts): a few seconds of deliveries at 500/s.
 */
const DELIVERED_MAX_PENDING = 2_000;

/**
 * Lifetime of the dispatcher lease without a renewal (renewed every third of it): how long the
 * notifications wait after their dispatcher's process died before another takes over. A process
 * that stops gracefully hands it over at once.
 */
export const DISPATCH_LEASE_MS = 5_000;

/** How often a process that is not the dispatcher tries to take the lease. */
const LEASE_TRY_EVERY_MS = 500;

/** Shortest time between two dispatcher passes woken by feed commits (the timer's are apart). */
const WAKE_MIN_GAP_MS = 5;

/**
 * How often a live notifier records the delivered attempts another process noted and did not
 * record (it died), and how old their notes must be: a live process writes its own within ms.
 */
const DELIVERED_SWEEP_EVERY_MS = 30_000;

export interface NotifierOptions {
  /** The order store of the process: the feed, the endpoints and the delivery history. */
  store: OrderStore;
  /**
   * The delivery records of the notifications in flight are group-committed (one transaction,
   * one fsync, for all of them: `store.deliveries.recordBatch`) instead of one transaction each:
   * with `synchronous=FULL`, an fsync per delivery bounds the throughput. Default: false.
   */
  groupCommit?: boolean;
  /**
   * Longest wait of a group commit for another process's write lock, on timers (the process that
   * commits orders holds it often). Default: the event worker's, 5 s. A record that cannot be
   * written fails its job, which is then sent again on the retry schedule.
   */
  storeLockWaitMs?: number;
  /** Redis of the notification queue. */
  redisUrl: string;
  /** BullMQ key prefix. Default: `bull`. */
  prefix?: string;
  /** Longest time one delivery may take. Default: {@link DEFAULT_NOTIFY_TIMEOUT_MS} (15 s). */
  timeoutMs?: number;
  /** Wait before each retry, ms; its length is the number of retries. Default: {@link DEFAULT_NOTIFY_RETRY_S}. */
  retryScheduleMs?: readonly number[];
  /** Deliveries in flight at once. Default: {@link DEFAULT_NOTIFY_CONCURRENCY}. */
  concurrency?: number;
  /**
   * Longest wait of a job for its order's earlier event delivered by this process before it
   * waits delayed instead (src/notify/order-wait.ts). Default: 5 s.
   */
  handOffMaxWaitMs?: number;
  /** How often the dispatcher reads the feed for new events. Default: {@link DEFAULT_NOTIFY_DISPATCH_EVERY_MS}. */
  dispatchEveryMs?: number;
  /** Lifetime of the dispatcher lease without a renewal. Default: {@link DISPATCH_LEASE_MS}. */
  dispatchLeaseMs?: number;
  /**
   * Whether the dispatcher makes each event's first attempt itself (direct-delivery.ts). Default:
   * true; false: every delivery is a job (tests of the jobs' own ways use it).
   */
  directDeliveries?: boolean;
  /** Lock of a notification job (a dead worker's jobs are taken over after it). Default: BullMQ's 30 s. */
  lockDurationMs?: number;
  /** How often stalled jobs are looked for. Default: BullMQ's 30 s. */
  stalledIntervalMs?: number;
  /** Times a job may stall before it fails for good. Default: {@link NOTIFY_MAX_STALLED_COUNT}. */
  maxStalledCount?: number;
  logger?: Logger;
  /** Clock for the history, ms. Default: `Date.now`. */
  now?: () => number;
}

export interface Notifier {
  readonly metrics: NotifyMetrics;
  readonly queue: Queue<NotifyJobData>;
  /** Runs one dispatcher pass now (after the one running, if any); resolves to the jobs it added. */
  dispatchNow(): Promise<number>;
  /** Stops dispatching and delivering (deliveries in flight finish); `false` when it had to give up waiting. */
  close(options?: { timeoutMs?: number }): Promise<boolean>;
}

/**
 * Starts the shop notifications in the worker process (docs/api.md, "Notifications"): the
 * dispatcher, which turns new feed events into jobs of {@link NOTIFY_QUEUE} every
 * `dispatchEveryMs`, and the notification worker, which delivers them.
 */
export async function startNotifier(options: NotifierOptions): Promise<Notifier> {
  const { store, logger } = options;
  const prefix = options.prefix ?? DEFAULT_QUEUE_PREFIX;
  const timeoutMs = options.timeoutMs ?? DEFAULT_NOTIFY_TIMEOUT_MS;
  const scheduleMs = options.retryScheduleMs ?? DEFAULT_NOTIFY_RETRY_S.map((s) => s * 1000);
  const dispatchEveryMs = options.dispatchEveryMs ?? DEFAULT_NOTIFY_DISPATCH_EVERY_MS;
  const concurrency = options.concurrency ?? DEFAULT_NOTIFY_CONCURRENCY;
  const metrics = createNotifyMetrics();

  const { connection, outage } = watchedRedis({
    url: options.redisUrl,
    component: 'notifier',
    logger,
    redis: { maxRetriesPerRequest: null, connectionName: 'h2h-notifier' },
  });
  const queue = new Queue<NotifyJobData>(NOTIFY_QUEUE, { connection, prefix });
  queue.on('error', outage.error);
  // The notes of delivered attempts and the order-wait marks: simple commands, issued by many
  // deliveries finishing at once. Auto-pipelined on a connection of their own, those issued in
  // one turn of the event loop go in one socket write (a write costs more than the command);
  // BullMQ's connection stays as BullMQ expects it. Each caller awaits its reply before it moves
  // its job, so the two connections never race.
  const notes = connection.duplicate({ enableAutoPipelining: true, connectionName: 'h2h-notifier-notes' });
  notes.on('error', outage.error);
  notes.on('ready', outage.ready);
  const agent = new Agent({ connect: { timeout: timeoutMs } });

  const lockTimeoutMs = options.storeLockWaitMs ?? DEFAULT_STORE_LOCK_WAIT_MS;
  const groupCommit = options.groupCommit
    ? new GroupCommit<Omit<NotifyDelivery, 'id'>, NotifyDelivery>({
        // Off the deliveries' path (delivered-records.ts): its tries for the write lock never
        // block the event loop that runs them.
        runBatch: (attempts) => store.deliveries.recordBatch(attempts, { lockTimeoutMs, yieldingLock: true }),
        maxBatchSize: concurrency,
      })
    : undefined;
  const hints = new DeliveryHints();
  const record = async (attempt: Omit<NotifyDelivery, 'id'>) => {
    const row = await (groupCommit ? groupCommit.submit(attempt) : store.deliveries.record(attempt));
    if (SETTLED_OUTCOMES.includes(attempt.outcome)) hints.settled(attempt.endpointId, attempt.seq);
    return row;
  };
  const marks = new WaitMarks(notes, queue.qualifiedName);
  const delivered = new DeliveredRecords({
    redis: notes,
    keyPrefix: queue.qualifiedName,
    record,
    onRecorded: (attempt, event) =>
      releaseSuccessor({ marks, queue, store }, attempt.endpointId, attempt.seq, event),
    maxPending: DELIVERED_MAX_PENDING,
    ...(logger ? { logger } : {}),
  });
  const deps = {
    store,
    queue,
    // At most half the slots wait for an earlier run of their order (order-wait.ts).
    running: new RunningDeliveries(Math.max(1, Math.floor(concurrency / 2))),
    marks,
    delivered,
    hints,
    ...(options.handOffMaxWaitMs === undefined ? {} : { handOffMaxWaitMs: options.handOffMaxWaitMs }),
    metrics,
    record,
    now: options.now ?? Date.now,
    post: (url: string, headers: Record<string, string>, body: string) =>
      postNotification(url, headers, body, { timeoutMs, dispatcher: agent }),
    ...(logger ? { logger } : {}),
  };
  const worker = new Worker<NotifyJobData, DeliverResult>(
    NOTIFY_QUEUE,
    (job, token) => deliverNotification(deps, job, token),
    {
      connection,
      prefix,
      concurrency,
      autorun: false,
      maxStalledCount: options.maxStalledCount ?? NOTIFY_MAX_STALLED_COUNT,
      ...(options.lockDurationMs ? { lockDuration: options.lockDurationMs } : {}),
      ...(options.stalledIntervalMs ? { stalledInterval: options.stalledIntervalMs } : {}),
      settings: {
        backoffStrategy: notifyBackoff(scheduleMs),
      },
    },
  );
  worker.on('error', outage.error);
  // A job failed for good however it came to that leaves a gave_up row (src/notify/parked-jobs.ts).
  const recording = inFlight();
  worker.on('failed', (job, err) => {
    if (!job) return;
    recording.track(
      (async () => {
        if (!(await job.isFailed())) return; // failed an attempt, retried on the schedule
        logger?.warn({ jobId: job.id, err }, 'notification given up');
        await recordParkedJob(deps, job);
      })().catch((error) =>
        logger?.error(
          { err: error, jobId: job.id },
          'could not record a given-up notification; recorded at the next start',
        ),
      ),
    );
  });

  const direct = new DirectDeliveries({
    deps,
    scheduleMs,
    limit: concurrency,
    // Looked at again just before each POST: a delivery that waited (its order's earlier event,
    // a Redis that does not answer) past the lease goes to a job instead.
    valid: () => mayDispatch(),
    ...(logger ? { logger } : {}),
  });
  // One dispatcher at a time among the processes that share the queue: its own deliveries are
  // not jobs whose ids would make a second dispatcher's a no-op. A holder that dies leaves the
  // lease to expire; the next holder reads the feed from the stored cursors, which stop before
  // the events the dead one had not settled, and looks those up before it sends them.
  const leaseMs = options.dispatchLeaseMs ?? DISPATCH_LEASE_MS;
  const lease = new PassLock(connection, { key: `${queue.qualifiedName}:dispatcher`, ttlMs: leaseMs });
  // A pass stops sending once the lease is this close to running out without a renewal.
  const leaseMarginMs = Math.round(leaseMs / 5);
  let held: HeldPassLock | undefined;
  let recoverUpTo = 0;
  let triedLeaseAt = Number.NEGATIVE_INFINITY;
  /**
   * Whether this process may dispatch now: it holds the lease, surely (its last renewal, counted
   * from when it was sent, is more than a margin within the TTL: a renewal Redis has not
   * answered does not count). Takes the lease when it is free, at most every LEASE_TRY_EVERY_MS.
   */
  const mayDispatch = (): boolean =>
    held !== undefined && !held.signal.aborted && Date.now() < held.validUntil - leaseMarginMs;
  const holdLease = async (): Promise<boolean> => {
    if (held && !held.signal.aborted) return mayDispatch();
    if (held) {
      logger?.warn('the notification dispatcher lease was lost; another process dispatches');
      void held.release();
      held = undefined;
    }
    if (performance.now() - triedLeaseAt < LEASE_TRY_EVERY_MS) return false;
    triedLeaseAt = performance.now();
    const taken = await lease.acquire();
    if (!taken) return false;
    try {
      // Another holder may have handled events past the stored cursors: read from those, and
      // look up every event committed so far before sending it.
      recoverUpTo = await store.feed.lastSeq();
    } catch (error) {
      // Not held, not left to renew itself: the next try takes it again. Not awaited: a Redis
      // that does not answer must not hold up the passes behind this one.
      void taken.release();
      throw error;
    }
    memory.clear();
    held = taken;
    return mayDispatch();
  };
  const memory: DispatchMemory = new Map();
  const cursorWrites = inFlight();
  let passing: Promise<number> = Promise.resolve(0);
  /** `onStart` runs when the pass starts (after the one running, if any). */
  const dispatchNow = (onStart?: () => void): Promise<number> => {
    passing = passing
      .catch(() => 0)
      .then(async () => {
        onStart?.();
        if (stopped || !(await holdLease())) return 0;
        const added = await dispatchNotifications(store, queue, {
          retries: scheduleMs.length,
          memory,
          hints,
          // Looked at again before each page: a pass held up past the lease stops there.
          valid: mayDispatch,
          ...(options.directDeliveries === false ? {} : { direct: { deliveries: direct, recoverUpTo } }),
          // The pass does not wait for its cursor write: a write that failed is only a cursor
          // behind, whose events are added again as a no-op (dispatcher.ts). close() waits for
          // the writes in flight before the last cursor writes.
          commit: async (write) => {
            cursorWrites.track(
              write().catch((err) =>
                logger?.warn({ err }, 'could not write a notification cursor; written later'),
              ),
            );
          },
        });
        if (added > 0) metrics.countDispatched(added);
        return added;
      });
    return passing;
  };
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  // Woken by the store after feed commits (feed.watch: every process's on this host on SQLite,
  // every host's on PostgreSQL), a pass runs at once instead of at the next tick; wake-ups that
  // come while one is waiting to start are one pass.
  // A woken pass adds a job or two at a time: the event goes at once, but each costs more CPU
  // than in the timer's batches (measured: +20 % per event at 500/s). So a wake-up is taken while
  // the deliveries are nearly idle, and left to the timer once a quarter of the slots are busy
  // (they are behind then, and batches catch up sooner); and a woken pass starts at least
  // WAKE_MIN_GAP_MS after the previous woken one.
  const busyAt = Math.max(1, Math.floor(concurrency / 4));
  let wakePending = false;
  let lastWokenAt = 0;
  const wake = () => {
    if (stopped || wakePending || deps.running.count >= busyAt) return;
    wakePending = true;
    const wait = lastWokenAt + WAKE_MIN_GAP_MS - performance.now();
    const pass = () => {
      if (stopped) return;
      dispatchNow(() => {
        wakePending = false;
        lastWokenAt = performance.now();
      }).catch((err) => logger?.warn({ err }, 'notification dispatch failed; trying again'));
    };
    if (wait > 0) setTimeout(pass, wait).unref();
    else pass();
  };
  const tick = () => {
    dispatchNow()
      .catch((err) => logger?.warn({ err }, 'notification dispatch failed; trying again'))
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, dispatchEveryMs);
      });
  };

  try {
    void worker.run();
    await worker.waitUntilReady();
  } catch (error) {
    await settlesWithin(Promise.all([worker.close(true), queue.close()]), 2_000);
    connection.disconnect();
    notes.disconnect();
    await agent.close();
    throw error;
  }
  // Deliveries answered 2xx whose records a process that died had not written yet.
  const sweepDelivered = (olderThan?: number) =>
    delivered
      .sweep(olderThan)
      .then((recorded) => {
        if (recorded > 0) logger?.warn({ recorded }, 'recorded delivered notifications that had no record');
      })
      .catch((err) => logger?.warn({ err }, 'could not look for delivered notifications without a record'));
  await sweepDelivered();
  const deliveredSweep = setInterval(
    () => void sweepDelivered(Date.now() - DELIVERED_SWEEP_EVERY_MS),
    DELIVERED_SWEEP_EVERY_MS,
  );
  deliveredSweep.unref();
  // Jobs that failed for good while no process could record it (one died in between).
  const swept = await sweepParkedJobs(deps, queue).catch((err) => {
    logger?.warn({ err }, 'could not look for given-up notifications without a record');
    return 0;
  });
  if (swept > 0) logger?.warn({ swept }, 'recorded given-up notifications that had no record');
  const stopWatching = await store.feed.watch(wake).catch((err) => {
    logger?.warn({ err }, 'cannot watch the feed for commits; dispatching on the timer only');
    return async () => {};
  });
  tick();
  logger?.info({ dispatchEveryMs, timeoutMs, retries: scheduleMs.length }, 'notifier started');

  let closing: Promise<boolean> | undefined;
  return {
    metrics,
    queue,
    dispatchNow,
    close({ timeoutMs: closeTimeoutMs = 10_000 } = {}) {
      closing ??= (async () => {
        stopped = true;
        clearTimeout(timer);
        await stopWatching();
        clearInterval(deliveredSweep);
        const graceful = await settlesWithin(
          Promise.all([passing.catch(() => {}).then(() => direct.drain()), worker.close()])
            .then(() => recording.settled())
            .then(() => delivered.drain())
            .then(() => groupCommit?.drain())
            .then(() => cursorWrites.settled())
            .then(async () => {
              // The cursors the dispatcher had not written yet (dispatcher.ts, CURSOR_WRITE_EVERY_MS).
              // Up to the first event the dispatcher's own deliveries left unsettled.
              for (const [id, { cursor }] of memory) {
                await store.endpoints.advanceCursor(id, durableCursor(id, cursor, direct));
              }
            }),
          closeTimeoutMs,
        );
        // The lease is handed over: the next process dispatches at once, not once it runs out.
        // Not awaited (a Redis that does not answer must not hold up the stop): its command goes
        // out before the connection closes, and its answer comes while the queue closes. Not
        // after a stop that gave up waiting: deliveries may still be on their way, and the next
        // holder would send them again; the lease runs out instead.
        if (graceful) void held?.release();
        await settlesWithin(queue.close(), 1_000);
        connection.disconnect();
        notes.disconnect();
        await agent.destroy().catch(() => {});
        return graceful;
      })();
      return closing;
    },
  };
}

/** Background work that close() must wait for: each promise is kept until it settles. */
function inFlight() {
  const running = new Set<Promise<unknown>>();
  return {
    /** Keeps `work` (which must not reject: catch first) until it settles. */
    track(work: Promise<unknown>): void {
      const kept = work.finally(() => running.delete(kept));
      running.add(kept);
    },
    /** Resolves once everything tracked so far has settled. */
    settled: () => Promise.all(running).then(() => {}),
  };
}
