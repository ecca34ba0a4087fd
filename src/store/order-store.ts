import { type ProductLink, ProductLinks } from '../catalog/product-map.js';
import { DEFAULT_FAILOVER_SETTINGS, type FailoverSettings } from '../domain/attempts.js';
import { DEFAULT_UPSTREAM } from '../upstream/model.js';
import { ApiTokens } from './api-tokens.js';
import { BalanceLedger } from './balance.js';
import { LocalCatalog } from './catalog.js';
import { ChangeFeed } from './feed.js';
import { HistoryRetention } from './history-retention.js';
import { NotifyDeliveries } from './notify-deliveries.js';
import { NotifyEndpoints } from './notify-endpoints.js';
import { NotifyOutbox } from './notify-outbox.js';
import { OrderClaims, type PollScheduleSettings } from './order-claims.js';
import { OrderQueries } from './order-queries.js';
import { OrderWriter } from './order-writer.js';
import { PollPlans } from './poll-plans.js';
import type { StoreDb } from './sql/executor.js';
import { StoreContext } from './store-context.js';
import { UpstreamCircuit } from './upstream-circuit.js';

/** The order store: one part for each job, on one database and clock. Every method is async. */
export interface OrderStore {
  /**
   * The only writer of order state: `applyOrderSnapshot` (every status change, whatever its
   * source), `createLocalOrder`, `markRejected`, `markSubmissionUnknown`.
   */
  readonly writer: OrderWriter;
  /**
   * The database handle every part above shares, and the store's clock: for the parts a process
   * adds with settings of its own (the claims on orders, `OrderClaims` in order-claims.ts).
   */
  readonly context: StoreContext;
  /** Each product's first-poll plan: the reconciler writes them, every writer reads them. */
  readonly pollPlans: PollPlans;
  /** Reads for the CLI, the metrics and the reconciler. */
  readonly queries: OrderQueries;
  /**
   * Whether the reconciler has stopped calling the upstream, and why (not order state): the
   * default upstream's, or in a store {@link withClaims} of another upstream, that one's.
   */
  readonly circuit: UpstreamCircuit;
  /** Every change of every order, in one order (the writer appends in its transactions). */
  readonly feed: ChangeFeed;
  /** The shop API's bearer tokens. */
  readonly tokens: ApiTokens;
  /** The shop's notification endpoints, their secrets and feed cursors. */
  readonly endpoints: NotifyEndpoints;
  /** The notifications still to deliver: the store is their queue. */
  readonly outbox: NotifyOutbox;
  /** Every notification delivery attempt. */
  readonly deliveries: NotifyDeliveries;
  /** The categories and products of the last catalog sync (no upstream call to read them). */
  readonly catalog: LocalCatalog;
  /** The last profile balance and the orders' debits and credits since (the writer accounts). */
  readonly balance: BalanceLedger;
  /** Prunes the history of old final orders (H2H_HISTORY_RETENTION_D; the worker runs it). */
  readonly retention: HistoryRetention;
}

export interface OpenOrderStoreOptions {
  /** The clock, in ms since the epoch. Default: `Date.now`. */
  now?: () => number;
  /**
   * BALANCE_LOW_THRESHOLD: `balance.low` is appended when the accounted balance falls under it
   * (docs/api.md, "Balance"). Every process that writes orders must use the same value, since
   * each write accounts. Default: 0 (off).
   */
  balanceLowThreshold?: number;
  /**
   * BALANCE_DRIFT_THRESHOLD: a profile read whose unexplained drift is past it starts a drift
   * episode (`balance.drift` at its second read in a row, the audit steered by a positive one;
   * docs/api.md, "Balance drift"). Every process that syncs the catalog must use the same value.
   * Default: 0 (off).
   */
  balanceDriftThreshold?: number;
  /**
   * When an order goes on to its next upstream (H2H_MAX_ATTEMPTS, H2H_FAILOVER_WITHIN_S;
   * domain/attempts.ts). Every process that writes orders must use the same. Default:
   * {@link DEFAULT_FAILOVER_SETTINGS}.
   */
  failover?: FailoverSettings;
  /**
   * The product map's links (`H2H_PRODUCT_MAP_FILE`, `catalogSettings(config).productLinks`): which
   * upstreams' products are candidates for one shop product (catalog.ts). Default: none (same
   * code, same product).
   */
  productLinks?: readonly ProductLink[];
}

/**
 * The order store's parts on a database (sql/executor.ts); processes open it with `openStore`
 * (open-store.ts), which opens the database too. The processes that poll or send orders add the
 * claims on orders (order-claims.ts, `withClaims`).
 */
export function openOrderStore(
  db: StoreDb,
  {
    now = Date.now,
    balanceLowThreshold = 0,
    balanceDriftThreshold = 0,
    failover = DEFAULT_FAILOVER_SETTINGS,
    productLinks = [],
  }: OpenOrderStoreOptions = {},
): OrderStore {
  const context = new StoreContext(db, now);
  const pollPlans = new PollPlans(context);
  const feed = new ChangeFeed(context);
  const balance = new BalanceLedger(context, feed, balanceLowThreshold, balanceDriftThreshold);
  return {
    writer: new OrderWriter(context, pollPlans, feed, balance, failover),
    catalog: new LocalCatalog(context, feed, balance, new ProductLinks(productLinks)),
    balance,
    context,
    pollPlans,
    feed,
    tokens: new ApiTokens(context),
    queries: new OrderQueries(context),
    circuit: new UpstreamCircuit(context),
    endpoints: new NotifyEndpoints(context),
    outbox: new NotifyOutbox(context),
    deliveries: new NotifyDeliveries(context),
    retention: new HistoryRetention(context),
  };
}

/** A store with the claims on orders: what the processes that poll, audit or send orders open. */
export type ClaimingStore<S extends OrderStore = OrderStore> = S & { readonly claims: OrderClaims };

/**
 * `store` with the {@link OrderClaims} of `settings` (`reconcilerSettings(config)`) on the orders
 * of `upstream` (default: the default upstream's), and that upstream's circuit: the claimer
 * calls that upstream only, and stops when its circuit is open.
 */
export function withClaims<S extends OrderStore>(
  store: S,
  settings: PollScheduleSettings,
  upstream: string = DEFAULT_UPSTREAM,
): ClaimingStore<S> {
  return {
    ...store,
    claims: new OrderClaims(store, settings, upstream),
    circuit: new UpstreamCircuit(store.context, upstream),
  };
}
