import type { Migration } from './migration.js';

/**
 * The schema steps whose SQL is the same on SQLite and PostgreSQL: written once here and listed
 * by both backends' migrations (sqlite/migrations.ts, postgres/migrations.ts), in order.
 */
export const SHARED_MIGRATIONS_FROM_13: readonly Migration[] = [
  {
    version: 13,
    description:
      'notify_deliveries_gave_up: the given-up attempts of each endpoint, so `status` counts them without reading the whole history',
    sql: `
      CREATE INDEX notify_deliveries_gave_up ON notify_deliveries (endpoint_id, seq) WHERE outcome = 'gave_up';
    `,
  },
  {
    version: 14,
    description:
      'notify_deliveries_attempt: one row per delivery attempt, so two processes recording the same attempt at once (a sweep and a live writer, two hosts) leave one',
    sql: `
      DELETE FROM notify_deliveries WHERE id NOT IN (
        SELECT MIN(id) FROM notify_deliveries
        GROUP BY endpoint_id, seq, attempt, requested_at, outcome);
      CREATE UNIQUE INDEX notify_deliveries_attempt
        ON notify_deliveries (endpoint_id, seq, attempt, requested_at, outcome);
    `,
  },
];

/** The steps from 18 on whose SQL is the same on both backends, listed last by both. */
export const SHARED_MIGRATIONS_FROM_18: readonly Migration[] = [
  {
    version: 18,
    description:
      "feed_events.previous_status: an order event's public status of the order before the change, recorded in the change's transaction; NULL for an order that had none, for an event of no order, and for every event written before this step",
    sql: `
      ALTER TABLE feed_events ADD COLUMN previous_status TEXT;
    `,
  },
  {
    version: 19,
    description:
      "poll_plans: each product's first-poll plan, which the reconciler alone writes from the orders' recorded times (its learned pace), in place of the pace histograms every writer kept (order_pace, order_pace_totals, dropped); order_events.occurred_at: a webhook's event time, so its delivery delay is a recorded fact",
    sql: `
      DROP TABLE IF EXISTS order_pace_totals;
      DROP TABLE IF EXISTS order_pace;
      ALTER TABLE order_events ADD COLUMN occurred_at BIGINT;
      CREATE TABLE poll_plans (
        product_code TEXT   PRIMARY KEY,
        final_ms     BIGINT NOT NULL,
        delivery_ms  BIGINT NOT NULL,
        min_ms       BIGINT NOT NULL,
        max_ms       BIGINT,
        outlier_ms   BIGINT,
        samples      BIGINT NOT NULL,
        planned_at   BIGINT NOT NULL
      );
    `,
  },
  {
    version: 20,
    description:
      "orders.upstream: the upstream an order is placed on (docs/upstreams.md); every order written before this step is the default upstream's",
    sql: `
      ALTER TABLE orders ADD COLUMN upstream TEXT NOT NULL DEFAULT 'default';
    `,
  },
  {
    version: 21,
    description:
      "upstream_circuit: one circuit per upstream (docs/upstreams.md), keyed by its name; an open circuit of the single upstream before this step is the default upstream's",
    sql: `
      CREATE TABLE upstream_circuit_v21 (
        upstream  TEXT    PRIMARY KEY,
        cause     TEXT    NOT NULL,
        code      TEXT    NOT NULL,
        message   TEXT    NOT NULL,
        fix       TEXT,
        opened_at BIGINT  NOT NULL,
        probed_at BIGINT,
        probes    INTEGER NOT NULL DEFAULT 0
      );
      INSERT INTO upstream_circuit_v21 (upstream, cause, code, message, fix, opened_at, probed_at, probes)
        SELECT 'default', cause, code, message, fix, opened_at, probed_at, probes FROM upstream_circuit;
      DROP TABLE upstream_circuit;
      ALTER TABLE upstream_circuit_v21 RENAME TO upstream_circuit;
    `,
  },
];

/**
 * Step 23, the same on both backends but for the function that finds a character in a text
 * (`slashAt`: the SQL of the position of the first `/` in `event_id`, 0 when none):
 * `order_events.upstream`, the upstream that said each event, and event ids unique per (source,
 * upstream, event id) instead of the `<name>/` prefix another upstream's webhook event ids had
 * (schemas 20 to 22). A prefixed id is split back into its upstream and its plain id: on an order
 * of that upstream, and on an order of another one when it was recorded `wrong_upstream`. Every
 * other event stays the default upstream's with its id as it is: a default upstream's event id
 * that reads `beta/123` stays its own. Also `orders_upstream_due`, so each upstream's due polls
 * (order-claims.ts) are read from an index rather than by skipping the others' due orders.
 */
export function eventUpstreamStep(slashAt: string): Migration {
  const prefix = `substr(event_id, 1, ${slashAt} - 1)`;
  const orderUpstream = '(SELECT o.upstream FROM orders o WHERE o.partner_ref = order_events.partner_ref)';
  return {
    version: 23,
    description:
      "order_events.upstream: the upstream that said each event (existing ones the default's, or the one their `<name>/` prefix named), and (source, upstream, event_id) unique in place of the prefix; orders_upstream_due on orders (upstream, next_poll_at) for each upstream's due polls",
    sql: `
      ALTER TABLE order_events ADD COLUMN upstream TEXT NOT NULL DEFAULT 'default';
      DROP INDEX order_events_source_event_id;
      UPDATE order_events SET upstream = ${prefix}, event_id = substr(event_id, ${slashAt} + 1)
        WHERE source = 'webhook' AND ${slashAt} > 1 AND ${prefix} <> 'default'
          AND ((reason <> 'wrong_upstream' AND ${orderUpstream} = ${prefix})
            OR (reason = 'wrong_upstream' AND ${orderUpstream} <> ${prefix}));
      CREATE UNIQUE INDEX order_events_source_upstream_event_id
        ON order_events (source, upstream, event_id) WHERE event_id IS NOT NULL;
      CREATE INDEX orders_upstream_due ON orders (upstream, next_poll_at);
    `,
  };
}

/** The steps from 24 on whose SQL is the same on both backends, listed last by both. */
export const SHARED_MIGRATIONS_FROM_24: readonly Migration[] = [
  {
    version: 24,
    description:
      "the catalog and the balance per upstream (docs/upstreams.md): catalog_categories keyed by (upstream, code), catalog_products by (upstream, id) with (upstream, code) unique and an index on code for the candidates of a product, catalog_sync and balance_ledger a row per upstream; everything before this step is the default upstream's",
    sql: `
      CREATE TABLE catalog_categories_v24 (
        upstream  TEXT    NOT NULL,
        code      TEXT    NOT NULL,
        name      TEXT    NOT NULL,
        sub_name  TEXT    NOT NULL,
        logo      TEXT    NOT NULL,
        is_active INTEGER NOT NULL,
        PRIMARY KEY (upstream, code)
      );
      INSERT INTO catalog_categories_v24 (upstream, code, name, sub_name, logo, is_active)
        SELECT 'default', code, name, sub_name, logo, is_active FROM catalog_categories;
      DROP TABLE catalog_categories;
      ALTER TABLE catalog_categories_v24 RENAME TO catalog_categories;

      CREATE TABLE catalog_products_v24 (
        upstream      TEXT             NOT NULL,
        id            TEXT             NOT NULL,
        code          TEXT             NOT NULL,
        name          TEXT             NOT NULL,
        category_code TEXT             NOT NULL,
        price         DOUBLE PRECISION NOT NULL,
        is_active     INTEGER          NOT NULL,
        target        TEXT,
        PRIMARY KEY (upstream, id)
      );
      INSERT INTO catalog_products_v24 (upstream, id, code, name, category_code, price, is_active, target)
        SELECT 'default', id, code, name, category_code, price, is_active, target FROM catalog_products;
      DROP TABLE catalog_products;
      ALTER TABLE catalog_products_v24 RENAME TO catalog_products;
      CREATE UNIQUE INDEX catalog_products_upstream_code ON catalog_products (upstream, code);
      CREATE INDEX catalog_products_code ON catalog_products (code);

      CREATE TABLE catalog_sync_v24 (
        upstream  TEXT   NOT NULL PRIMARY KEY,
        synced_at BIGINT NOT NULL
      );
      INSERT INTO catalog_sync_v24 (upstream, synced_at) SELECT 'default', synced_at FROM catalog_sync;
      DROP TABLE catalog_sync;
      ALTER TABLE catalog_sync_v24 RENAME TO catalog_sync;

      CREATE TABLE balance_ledger_v24 (
        upstream        TEXT             NOT NULL PRIMARY KEY,
        profile_balance DOUBLE PRECISION NOT NULL,
        profile_read_at BIGINT           NOT NULL,
        debited         DOUBLE PRECISION NOT NULL DEFAULT 0,
        credited        DOUBLE PRECISION NOT NULL DEFAULT 0,
        unpriced        INTEGER          NOT NULL DEFAULT 0,
        low_alerted     INTEGER          NOT NULL DEFAULT 0
      );
      INSERT INTO balance_ledger_v24 (upstream, profile_balance, profile_read_at, debited, credited, unpriced, low_alerted)
        SELECT 'default', profile_balance, profile_read_at, debited, credited, unpriced, low_alerted FROM balance_ledger;
      DROP TABLE balance_ledger;
      ALTER TABLE balance_ledger_v24 RENAME TO balance_ledger;
    `,
  },
];

/**
 * Schema 25's SQL on both backends (each adds its own part): each order gets its attempts
 * (docs/upstreams.md, "Orders and attempts"). `shop_ref` is the shop's partner_ref, unique (the
 * order's `partner_ref` is its current attempt's, sent to the upstream); `attempt` numbers the
 * current attempt; `attempts` keeps the ended ones (JSON, null while there were none); `route`
 * the routing's choice and the candidates left (JSON, null for an order not routed);
 * `orders_completion` gives the `fastest` policy each upstream's recent completion times of a
 * product from an index.
 */
export const ATTEMPTS_SQL = `
    ALTER TABLE orders ADD COLUMN shop_ref TEXT;
    ALTER TABLE orders ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE orders ADD COLUMN attempts TEXT;
    ALTER TABLE orders ADD COLUMN route TEXT;
    UPDATE orders SET shop_ref = partner_ref;
    CREATE UNIQUE INDEX orders_shop_ref ON orders (shop_ref);
    CREATE INDEX orders_completion ON orders (upstream, product_code, final_at) WHERE status = 'SUCCESS';
`;

/** Schema 25's description, the same on both backends. */
export const ATTEMPTS_DESCRIPTION =
  "orders.shop_ref (the shop's partner_ref, unique; every order before this step is its own), orders.attempt, orders.attempts and orders.route: an order is placed on one upstream at a time and on the next only after a definite non-fulfilment (docs/upstreams.md); order_events.partner_ref no longer references orders, since an ended attempt's events keep its own partner_ref";

/** The steps from 26 on whose SQL is the same on both backends, listed last by both. */
export const SHARED_MIGRATIONS_FROM_26: readonly Migration[] = [
  {
    version: 26,
    description:
      "poll_plans keyed by (upstream, product_code): each upstream's reconciler learns its own pace from its own orders' events and writes its own first-poll plans (docs/reconciler.md, \"Several upstreams\"); every plan before this step is the default upstream's. order_events_upstream on order_events (upstream, id): each upstream's recent events, which its pace is learned from",
    sql: `
      CREATE TABLE poll_plans_v26 (
        upstream     TEXT   NOT NULL,
        product_code TEXT   NOT NULL,
        final_ms     BIGINT NOT NULL,
        delivery_ms  BIGINT NOT NULL,
        min_ms       BIGINT NOT NULL,
        max_ms       BIGINT,
        outlier_ms   BIGINT,
        samples      BIGINT NOT NULL,
        planned_at   BIGINT NOT NULL,
        PRIMARY KEY (upstream, product_code)
      );
      INSERT INTO poll_plans_v26
          (upstream, product_code, final_ms, delivery_ms, min_ms, max_ms, outlier_ms, samples, planned_at)
        SELECT 'default', product_code, final_ms, delivery_ms, min_ms, max_ms, outlier_ms, samples, planned_at
        FROM poll_plans;
      DROP TABLE poll_plans;
      ALTER TABLE poll_plans_v26 RENAME TO poll_plans;
      CREATE INDEX order_events_upstream ON order_events (upstream, id);
    `,
  },
];

/** The steps from 28 on whose SQL is the same on both backends, listed after each backend's step 27. */
export const SHARED_MIGRATIONS_FROM_28: readonly Migration[] = [
  {
    version: 28,
    description:
      'orders.history_pruned_at: when the history retention (H2H_HISTORY_RETENTION_D) last deleted the order\'s events and notification records; orders_history_prunable on updated_at of the settled orders with history not pruned since their last change, so the retention finds them without reading every order; notify_deliveries_partner_ref, an order\'s delivery records (docs/store.md, "History retention")',
    sql: `
      ALTER TABLE orders ADD COLUMN history_pruned_at BIGINT;
      CREATE INDEX orders_history_prunable ON orders (updated_at)
        WHERE next_poll_at IS NULL AND (history_pruned_at IS NULL OR history_pruned_at <= updated_at);
      CREATE INDEX notify_deliveries_partner_ref ON notify_deliveries (partner_ref);
    `,
  },
  {
    version: 29,
    description:
      'balance drift (docs/api.md, "Balance drift"): balance_ledger keeps the drift carried from read to read (drift, drift_unexplained, drift_since, drift_alerted, audit_owed, refunded); balance_observations records every profile read against the expected balance; orders_in_doubt and orders_success_by_upstream serve the read\'s in-doubt sum and the audit steered to the most recent final orders',
    sql: `
      ALTER TABLE balance_ledger ADD COLUMN drift DOUBLE PRECISION NOT NULL DEFAULT 0;
      ALTER TABLE balance_ledger ADD COLUMN drift_unexplained DOUBLE PRECISION NOT NULL DEFAULT 0;
      ALTER TABLE balance_ledger ADD COLUMN drift_since BIGINT;
      ALTER TABLE balance_ledger ADD COLUMN drift_alerted INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE balance_ledger ADD COLUMN audit_owed DOUBLE PRECISION NOT NULL DEFAULT 0;
      ALTER TABLE balance_ledger ADD COLUMN refunded DOUBLE PRECISION NOT NULL DEFAULT 0;
      CREATE TABLE balance_observations (
        upstream          TEXT             NOT NULL,
        read_at           BIGINT           NOT NULL,
        profile_balance   DOUBLE PRECISION NOT NULL,
        expected          DOUBLE PRECISION NOT NULL,
        drift             DOUBLE PRECISION NOT NULL,
        read_drift        DOUBLE PRECISION NOT NULL,
        in_doubt          DOUBLE PRECISION NOT NULL,
        unexplained       DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (upstream, read_at)
      );
      CREATE INDEX orders_in_doubt ON orders (upstream)
        WHERE create_in_doubt_at IS NOT NULL AND submission_state <> 'accepted';
      CREATE INDEX orders_success_by_upstream ON orders (upstream, final_at)
        WHERE status = 'SUCCESS' AND next_poll_at IS NULL;
    `,
  },
  {
    version: 30,
    description:
      'orders_submission_state and orders_upstream_status, each ending in the id: GET /v1/orders filtered by a submission state (cancelled, rejected …) or an upstream status string reads the matching orders newest first instead of every order between them',
    sql: `
      CREATE INDEX orders_submission_state ON orders (submission_state, id);
      CREATE INDEX orders_upstream_status ON orders (upstream_status, id);
    `,
  },
  {
    version: 31,
    description:
      "orders_upstream_due on (upstream, next_poll_at, id), the whole order of a reconciler's claim of its due orders: on PostgreSQL, with another upstream's backlog of due orders, the claim walked all of them through orders_next_poll_at (0.3 s at 50,000; with incremental sort off in the claim's transaction until schema 32)",
    sql: `
      DROP INDEX orders_upstream_due;
      CREATE INDEX orders_upstream_due ON orders (upstream, next_poll_at, id);
    `,
  },
  {
    version: 32,
    description:
      "one index of the open orders: orders_open on (upstream, next_poll_at, id, local_created_at) of the orders with a next poll only, in place of orders_upstream_due, orders_next_poll_at (both of every order) and orders_open_created; a reconciler's claim, its oldest open order and its due count read its own upstream's open orders, and PostgreSQL's planner has no index of every upstream's open orders to walk instead (it did, beside another upstream's backlog: 0.1 s a pass at 50,000)",
    // Built before the old ones are dropped: on PostgreSQL the build holds writes to orders, the
    // drops hold reads too, until the step commits, which then follows at once.
    sql: `
      CREATE INDEX orders_open ON orders (upstream, next_poll_at, id, local_created_at)
        WHERE next_poll_at IS NOT NULL;
      DROP INDEX orders_upstream_due;
      DROP INDEX orders_next_poll_at;
      DROP INDEX orders_open_created;
    `,
  },
];

/**
 * An order's place in `order_counts` (schema 27), of `row` (`NEW` or `OLD` in a trigger, or
 * `orders` itself): its upstream, its status as `status` counts it (the last applied status,
 * else the upstream's string, else ''), its submission state, whether it is open (has a next
 * poll) and whether it is stuck as `status` counts it (marked stuck, and open or a SUCCESS still
 * without its serial).
 */
export function orderCountKey(row: string): string[] {
  const r = row === '' ? '' : `${row}.`;
  return [
    `${r}upstream`,
    `COALESCE(${r}status, ${r}upstream_status, '')`,
    `${r}submission_state`,
    `CASE WHEN ${r}next_poll_at IS NOT NULL THEN 1 ELSE 0 END`,
    `CASE WHEN ${r}stuck_at IS NOT NULL AND (${r}next_poll_at IS NOT NULL OR (${r}status = 'SUCCESS' AND ${r}serial_number IS NULL)) THEN 1 ELSE 0 END`,
  ];
}

/** The columns of `orders` an order's place in `order_counts` depends on: an update of another changes no count. */
export const ORDER_COUNT_COLUMNS =
  'upstream, status, upstream_status, submission_state, next_poll_at, stuck_at, serial_number';

/**
 * Schema 27's SQL on both backends (each adds its triggers): `order_counts`, the orders counted
 * by their place (`orderCountKey`), filled from the orders there are, so `status` and each
 * reconcile pass read a few rows instead of counting every order the store ever held.
 */
export const ORDER_COUNTS_SQL = `
    CREATE TABLE order_counts (
      upstream         TEXT    NOT NULL,
      status_key       TEXT    NOT NULL,
      submission_state TEXT    NOT NULL,
      open             INTEGER NOT NULL,
      stuck            INTEGER NOT NULL,
      n                BIGINT  NOT NULL,
      PRIMARY KEY (upstream, status_key, submission_state, open, stuck)
    );
    INSERT INTO order_counts (upstream, status_key, submission_state, open, stuck, n)
      SELECT ${orderCountKey('').join(', ')}, COUNT(*) FROM orders
      GROUP BY ${orderCountKey('').join(', ')};
    CREATE INDEX orders_open_created ON orders (local_created_at) WHERE next_poll_at IS NOT NULL;
    CREATE INDEX orders_success_final ON orders (final_at, last_polled_at, upstream) WHERE status = 'SUCCESS';
`;

/** Schema 27's description, the same on both backends. */
export const ORDER_COUNTS_DESCRIPTION =
  'order_counts: the orders counted by upstream, status, submission state, open and stuck, kept by triggers on orders in the transaction of each write, so `status` and the reconcile pass read counts instead of every order; orders_open_created: the oldest open order from an index of the open orders only; orders_success_final: the audit coverage of `status` from the SUCCESS orders of its window only';
