import type { Logger } from 'pino';
import { DEFAULT_FEED_PRUNE_BATCH } from '../store/feed.js';
import { DEFAULT_PRUNE_BATCH_ROWS } from '../store/history-retention.js';
import type { OrderStore } from '../store/order-store.js';

/** How often the worker runs a retention pass (and once at start). */
export const RETENTION_EVERY_MS = 3_600_000;

export interface RetentionSettings {
  /** H2H_FEED_RETENTION_D, in ms: the change feed's window. */
  feedRetentionMs: number;
  /** H2H_HISTORY_RETENTION_D, in ms; 0: the history is kept for ever. */
  historyRetentionMs: number;
  /** The most rows one write transaction deletes. Default: {@link DEFAULT_PRUNE_BATCH_ROWS}. */
  batchRows?: number;
}

/** What one pass deleted. */
export interface RetentionPass {
  feedEvents: number;
  /** Orders whose history the pass pruned (the rows themselves stay). */
  orders: number;
  orderEvents: number;
  deliveries: number;
  /** Write transactions it took. */
  batches: number;
}

/**
 * One retention pass (docs/store.md, "History retention"): the change feed's events older than
 * its window, then the history of final orders last changed before the history retention, each a
 * run of short write transactions of at most `batchRows` rows. Between two of them the event
 * loop turns, so the process's other writes queue in between; `shouldStop` (checked there) ends
 * the pass early, the rest waiting for the next one.
 */
export async function runRetentionPass(
  store: Pick<OrderStore, 'feed' | 'retention' | 'context'>,
  { feedRetentionMs, historyRetentionMs, batchRows }: RetentionSettings,
  { shouldStop = () => false }: { shouldStop?: () => boolean } = {},
): Promise<RetentionPass> {
  const pass: RetentionPass = { feedEvents: 0, orders: 0, orderEvents: 0, deliveries: 0, batches: 0 };
  const now = store.context.now();
  const feedBatch = batchRows ?? DEFAULT_FEED_PRUNE_BATCH;
  for (;;) {
    if (shouldStop()) return pass;
    const pruned = await store.feed.pruneBatch(now - feedRetentionMs, feedBatch);
    pass.feedEvents += pruned;
    pass.batches += 1;
    if (pruned < feedBatch) break;
    await nextTurn();
  }
  if (historyRetentionMs === 0) return pass;
  for (;;) {
    if (shouldStop()) return pass;
    const batch = await store.retention.pruneBatch(
      now - historyRetentionMs,
      batchRows ?? DEFAULT_PRUNE_BATCH_ROWS,
    );
    pass.orders += batch.orders;
    pass.orderEvents += batch.orderEvents;
    pass.deliveries += batch.deliveries;
    pass.batches += 1;
    if (!batch.more) return pass;
    await nextTurn();
  }
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Runs {@link runRetentionPass} now and every {@link RETENTION_EVERY_MS}, one pass at a time; a
 * pass that fails (a store busy with another writer past the lock wait) is tried again at the
 * next. Returns its stop, which ends a running pass after its current batch.
 */
export function startRetention(
  store: Pick<OrderStore, 'feed' | 'retention' | 'context'>,
  settings: RetentionSettings,
  logger: Pick<Logger, 'info' | 'warn'> | undefined,
): () => Promise<boolean> {
  let stopped = false;
  let running: Promise<void> | undefined;
  const run = () => {
    if (running || stopped) return;
    running = runRetentionPass(store, settings, { shouldStop: () => stopped })
      .then(
        (pass) => {
          if (pass.feedEvents + pass.orderEvents + pass.deliveries > 0) {
            logger?.info(pass, 'retention: feed events and order history past their retention pruned');
          }
        },
        (err) => logger?.warn({ err }, 'retention: pruning failed; trying again in an hour'),
      )
      .finally(() => {
        running = undefined;
      });
  };
  run();
  const timer = setInterval(run, RETENTION_EVERY_MS).unref();
  return async () => {
    stopped = true;
    clearInterval(timer);
    await running;
    return true;
  };
}
