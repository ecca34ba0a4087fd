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
 * Schema 23's SQL on both backends (each adds its own part): each order gets its attempts
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

/** Schema 23's description, the same on both backends. */
export const ATTEMPTS_DESCRIPTION =
  "orders.shop_ref (the shop's partner_ref, unique; every order before this step is its own), orders.attempt, orders.attempts and orders.route: an order is placed on one upstream at a time and on the next only after a definite non-fulfilment (docs/upstreams.md); order_events.partner_ref no longer references orders, since an ended attempt's events keep its own partner_ref";
