import type { Database } from 'better-sqlite3';
import { ApiTokens } from './api-tokens.js';
import { ChangeFeed } from './feed.js';
import { OrderQueries } from './order-queries.js';
import { OrderRows } from './order-rows.js';
import { OrderWriter } from './order-writer.js';
import { PollSchedule, type PollScheduleSettings } from './poll-schedule.js';
import { UpstreamCircuit } from './upstream-circuit.js';

/** The order store: one part for each job, on one connection, clock and write lock. */
export interface OrderStore {
  /**
   * The only writer of order state: `applyOrderSnapshot` (every status change, whatever its
   * source), `createLocalOrder`, `markRejected`, `markSubmissionUnknown`.
   */
  readonly writer: OrderWriter;
  /** When each order is polled: the rule, and the reconciler's claims and poll records. */
  readonly schedule: PollSchedule;
  /** Reads for the CLI, the metrics and the reconciler. */
  readonly queries: OrderQueries;
  /** Whether the reconciler has stopped calling the upstream, and why (not order state). */
  readonly circuit: UpstreamCircuit;
  /** Every change of every order, in one order (the writer appends in its transactions). */
  readonly feed: ChangeFeed;
  /** The shop API's bearer tokens. */
  readonly tokens: ApiTokens;
}

export interface OpenOrderStoreOptions {
  /** The clock, in ms since the epoch. Default: `Date.now`. */
  now?: () => number;
}

/**
 * Opens the order store on a database from `openDatabase`. `settings` is the poll schedule:
 * `reconcilerSettings(config)` in every process that writes orders (worker, reconciler, CLI),
 * since each write sets the order's next poll time and their schedules must agree. Throws a
 * RangeError naming the first setting that cannot make a schedule.
 */
export function openOrderStore(
  db: Database,
  settings: PollScheduleSettings,
  { now = Date.now }: OpenOrderStoreOptions = {},
): OrderStore {
  const rows = new OrderRows(db, now);
  const schedule = new PollSchedule(rows, settings);
  const feed = new ChangeFeed(rows);
  return {
    writer: new OrderWriter(rows, schedule, feed),
    schedule,
    feed,
    tokens: new ApiTokens(rows),
    queries: new OrderQueries(rows),
    circuit: new UpstreamCircuit(rows),
  };
}
