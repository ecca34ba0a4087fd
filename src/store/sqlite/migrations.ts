import type { Migration } from '../sql/migration.js';
import {
  ATTEMPTS_DESCRIPTION,
  ATTEMPTS_SQL,
  eventUpstreamStep,
  ORDER_COUNT_COLUMNS,
  ORDER_COUNTS_DESCRIPTION,
  ORDER_COUNTS_SQL,
  orderCountKey,
  SHARED_MIGRATIONS_FROM_13,
  SHARED_MIGRATIONS_FROM_18,
  SHARED_MIGRATIONS_FROM_24,
  SHARED_MIGRATIONS_FROM_26,
  SHARED_MIGRATIONS_FROM_28,
} from '../sql/shared-migrations.js';

/**
 * Every schema step of the SQLite store, in order (run by `runMigrations`, ../migrations.ts). Timestamps we produce are integer milliseconds since the epoch;
 * the upstream's own timestamps (`created_at`, `success_at`) are kept as the ISO strings it sent.
 * docs/store.md describes each column.
 */
export const SQLITE_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'orders and order_events',
    sql: `
      CREATE TABLE orders (
        id               INTEGER PRIMARY KEY,
        partner_ref      TEXT    NOT NULL UNIQUE,
        invoice_number   TEXT    UNIQUE,
        product_code     TEXT,
        product_id       TEXT,
        target_data      TEXT,
        callback_url     TEXT,
        amount           REAL,
        status           TEXT,
        upstream_status  TEXT,
        serial_number    TEXT,
        nickname         TEXT,
        message          TEXT,
        target           TEXT,
        product_name     TEXT,
        created_at       TEXT,
        success_at       TEXT,
        local_created_at INTEGER NOT NULL,
        updated_at       INTEGER NOT NULL,
        submission_state TEXT    NOT NULL
          CHECK (submission_state IN ('pending', 'accepted', 'rejected', 'unknown')),
        rejection_code   TEXT,
        rejection_detail TEXT,
        last_polled_at   INTEGER,
        next_poll_at     INTEGER,
        poll_count       INTEGER NOT NULL DEFAULT 0,
        stuck_at         INTEGER,
        final_at         INTEGER
      );
      CREATE INDEX orders_next_poll_at ON orders (next_poll_at);
      CREATE INDEX orders_status ON orders (status);
      CREATE INDEX orders_local_created_at ON orders (local_created_at);

      CREATE TABLE order_events (
        id          INTEGER PRIMARY KEY,
        partner_ref TEXT    NOT NULL REFERENCES orders (partner_ref),
        source      TEXT    NOT NULL CHECK (source IN ('create', 'webhook', 'poll', 'manual')),
        event_id    TEXT,
        status      TEXT,
        payload     TEXT,
        received_at INTEGER NOT NULL,
        applied_at  INTEGER NOT NULL,
        changed     INTEGER NOT NULL CHECK (changed IN (0, 1)),
        reason      TEXT    NOT NULL
      );
      CREATE UNIQUE INDEX order_events_source_event_id
        ON order_events (source, event_id) WHERE event_id IS NOT NULL;
      CREATE INDEX order_events_partner_ref ON order_events (partner_ref);
    `,
  },
  {
    version: 2,
    description: 'orders.poll_leased_until: a reconciler claims an order before polling it',
    sql: `
      ALTER TABLE orders ADD COLUMN poll_leased_until INTEGER;
    `,
  },
  {
    version: 3,
    description: 'upstream_circuit: why the reconciler stopped calling the upstream, while it has',
    sql: `
      CREATE TABLE upstream_circuit (
        id        INTEGER PRIMARY KEY CHECK (id = 1),
        cause     TEXT    NOT NULL,
        code      TEXT    NOT NULL,
        message   TEXT    NOT NULL,
        fix       TEXT,
        opened_at INTEGER NOT NULL,
        probed_at INTEGER,
        probes    INTEGER NOT NULL DEFAULT 0
      );
    `,
  },
  {
    version: 4,
    description:
      "orders.submission_state 'blocked' (refused for our configuration), blocked_code and blocked_detail",
    rebuildsTables: true,
    sql: `
      CREATE TABLE orders_v4 (
        id                INTEGER PRIMARY KEY,
        partner_ref       TEXT    NOT NULL UNIQUE,
        invoice_number    TEXT    UNIQUE,
        product_code      TEXT,
        product_id        TEXT,
        target_data       TEXT,
        callback_url      TEXT,
        amount            REAL,
        status            TEXT,
        upstream_status   TEXT,
        serial_number     TEXT,
        nickname          TEXT,
        message           TEXT,
        target            TEXT,
        product_name      TEXT,
        created_at        TEXT,
        success_at        TEXT,
        local_created_at  INTEGER NOT NULL,
        updated_at        INTEGER NOT NULL,
        submission_state  TEXT    NOT NULL
          CHECK (submission_state IN ('pending', 'accepted', 'rejected', 'unknown', 'blocked')),
        rejection_code    TEXT,
        rejection_detail  TEXT,
        last_polled_at    INTEGER,
        next_poll_at      INTEGER,
        poll_count        INTEGER NOT NULL DEFAULT 0,
        stuck_at          INTEGER,
        final_at          INTEGER,
        poll_leased_until INTEGER,
        blocked_code      TEXT,
        blocked_detail    TEXT
      );
      INSERT INTO orders_v4 (
        id, partner_ref, invoice_number, product_code, product_id, target_data, callback_url,
        amount, status, upstream_status, serial_number, nickname, message, target, product_name,
        created_at, success_at, local_created_at, updated_at, submission_state, rejection_code,
        rejection_detail, last_polled_at, next_poll_at, poll_count, stuck_at, final_at,
        poll_leased_until)
      SELECT
        id, partner_ref, invoice_number, product_code, product_id, target_data, callback_url,
        amount, status, upstream_status, serial_number, nickname, message, target, product_name,
        created_at, success_at, local_created_at, updated_at, submission_state, rejection_code,
        rejection_detail, last_polled_at, next_poll_at, poll_count, stuck_at, final_at,
        poll_leased_until
      FROM orders;
      DROP TABLE orders;
      ALTER TABLE orders_v4 RENAME TO orders;
      CREATE INDEX orders_next_poll_at ON orders (next_poll_at);
      CREATE INDEX orders_status ON orders (status);
      CREATE INDEX orders_local_created_at ON orders (local_created_at);
    `,
  },
  {
    version: 5,
    description: 'orders_audit: settled SUCCESS orders by when they were last checked, for the audit',
    sql: `
      CREATE INDEX orders_audit ON orders (MAX(COALESCE(last_polled_at, 0), final_at))
        WHERE status = 'SUCCESS' AND next_poll_at IS NULL;
    `,
  },
  {
    version: 6,
    description:
      "order_pace: the upstream's learned pace (time from creation to each state per product, webhook delivery delay), as log-bucket histograms",
    sql: `
      CREATE TABLE order_pace (
        product_code TEXT NOT NULL,
        state TEXT NOT NULL,
        bucket INTEGER NOT NULL,
        weight REAL NOT NULL,
        PRIMARY KEY (product_code, state, bucket)
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 7,
    description:
      'orders.version and feed_events: every change of an order, written in the same transaction (the change feed and outbox of the shop notifications)',
    sql: `
      ALTER TABLE orders ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
      CREATE TABLE feed_events (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        type        TEXT    NOT NULL,
        partner_ref TEXT,
        version     INTEGER,
        timestamp   INTEGER NOT NULL,
        data        TEXT    NOT NULL
      );
      CREATE INDEX feed_events_timestamp ON feed_events (timestamp);
    `,
  },
  {
    version: 8,
    description: "api_tokens: the shop API's bearer tokens (hashed), with scopes, last use and revocation",
    sql: `
      CREATE TABLE api_tokens (
        id           TEXT    PRIMARY KEY,
        name         TEXT    NOT NULL,
        scopes       TEXT    NOT NULL,
        secret_hash  TEXT    NOT NULL,
        created_at   INTEGER NOT NULL,
        last_used_at INTEGER,
        revoked_at   INTEGER
      );
    `,
  },
  {
    version: 9,
    description:
      "notify_endpoints and notify_deliveries: the shop's notification endpoints (secret, event filter, feed cursor) and every delivery attempt",
    sql: `
      CREATE TABLE notify_endpoints (
        id                   INTEGER PRIMARY KEY AUTOINCREMENT,
        url                  TEXT    NOT NULL,
        events               TEXT    NOT NULL,
        secret               TEXT    NOT NULL,
        previous_secret      TEXT,
        previous_secret_until INTEGER,
        created_at           INTEGER NOT NULL,
        disabled_at          INTEGER,
        disabled_reason      TEXT,
        from_seq             INTEGER NOT NULL,
        cursor               INTEGER NOT NULL
      );
      CREATE TABLE notify_deliveries (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        endpoint_id  INTEGER NOT NULL REFERENCES notify_endpoints (id),
        seq          INTEGER NOT NULL,
        type         TEXT    NOT NULL,
        partner_ref  TEXT,
        attempt      INTEGER NOT NULL,
        requested_at INTEGER NOT NULL,
        status       INTEGER,
        duration_ms  INTEGER,
        error        TEXT,
        outcome      TEXT    NOT NULL
      );
      CREATE INDEX notify_deliveries_endpoint_seq ON notify_deliveries (endpoint_id, seq);
      CREATE INDEX notify_deliveries_requested_at ON notify_deliveries (requested_at);
      CREATE INDEX feed_events_partner_ref ON feed_events (partner_ref, seq);
    `,
  },
  {
    version: 10,
    description:
      "orders.submission_state 'queued' (accepted by the shop API, waiting for its turn to be submitted), with an index of the queue",
    rebuildsTables: true,
    sql: `
      CREATE TABLE orders_v10 (
        id                INTEGER PRIMARY KEY,
        partner_ref       TEXT    NOT NULL UNIQUE,
        invoice_number    TEXT    UNIQUE,
        product_code      TEXT,
        product_id        TEXT,
        target_data       TEXT,
        callback_url      TEXT,
        amount            REAL,
        status            TEXT,
        upstream_status   TEXT,
        serial_number     TEXT,
        nickname          TEXT,
        message           TEXT,
        target            TEXT,
        product_name      TEXT,
        created_at        TEXT,
        success_at        TEXT,
        local_created_at  INTEGER NOT NULL,
        updated_at        INTEGER NOT NULL,
        submission_state  TEXT    NOT NULL
          CHECK (submission_state IN ('queued', 'pending', 'accepted', 'rejected', 'unknown', 'blocked')),
        rejection_code    TEXT,
        rejection_detail  TEXT,
        last_polled_at    INTEGER,
        next_poll_at      INTEGER,
        poll_count        INTEGER NOT NULL DEFAULT 0,
        stuck_at          INTEGER,
        final_at          INTEGER,
        poll_leased_until INTEGER,
        blocked_code      TEXT,
        blocked_detail    TEXT,
        version           INTEGER NOT NULL DEFAULT 0
      );
      INSERT INTO orders_v10 (
        id, partner_ref, invoice_number, product_code, product_id, target_data, callback_url,
        amount, status, upstream_status, serial_number, nickname, message, target, product_name,
        created_at, success_at, local_created_at, updated_at, submission_state, rejection_code,
        rejection_detail, last_polled_at, next_poll_at, poll_count, stuck_at, final_at,
        poll_leased_until, blocked_code, blocked_detail, version)
      SELECT
        id, partner_ref, invoice_number, product_code, product_id, target_data, callback_url,
        amount, status, upstream_status, serial_number, nickname, message, target, product_name,
        created_at, success_at, local_created_at, updated_at, submission_state, rejection_code,
        rejection_detail, last_polled_at, next_poll_at, poll_count, stuck_at, final_at,
        poll_leased_until, blocked_code, blocked_detail, version
      FROM orders;
      DROP TABLE orders;
      ALTER TABLE orders_v10 RENAME TO orders;
      CREATE INDEX orders_next_poll_at ON orders (next_poll_at);
      CREATE INDEX orders_status ON orders (status);
      CREATE INDEX orders_local_created_at ON orders (local_created_at);
      CREATE INDEX orders_audit ON orders (MAX(COALESCE(last_polled_at, 0), final_at))
        WHERE status = 'SUCCESS' AND next_poll_at IS NULL;
      CREATE INDEX orders_queued ON orders (id) WHERE submission_state = 'queued';
    `,
  },
  {
    version: 11,
    description:
      'the local catalog (catalog_categories, catalog_products, catalog_sync) and the balance (balance_ledger: the last profile read plus local accounting)',
    sql: `
      CREATE TABLE catalog_categories (
        code      TEXT    PRIMARY KEY,
        name      TEXT    NOT NULL,
        sub_name  TEXT    NOT NULL,
        logo      TEXT    NOT NULL,
        is_active INTEGER NOT NULL
      );
      CREATE TABLE catalog_products (
        id            TEXT    PRIMARY KEY,
        code          TEXT    NOT NULL UNIQUE,
        name          TEXT    NOT NULL,
        category_code TEXT    NOT NULL,
        price         REAL    NOT NULL,
        is_active     INTEGER NOT NULL,
        target        TEXT
      );
      CREATE TABLE catalog_sync (
        id        INTEGER PRIMARY KEY CHECK (id = 1),
        synced_at INTEGER NOT NULL
      );
      CREATE TABLE balance_ledger (
        id               INTEGER PRIMARY KEY CHECK (id = 1),
        profile_balance  REAL    NOT NULL,
        profile_read_at  INTEGER NOT NULL,
        debited          REAL    NOT NULL DEFAULT 0,
        credited         REAL    NOT NULL DEFAULT 0,
        unpriced         INTEGER NOT NULL DEFAULT 0,
        low_alerted      INTEGER NOT NULL DEFAULT 0
      );
    `,
  },
  {
    version: 12,
    description:
      'orders.debited_amount: what the balance accounting debited for the order when the upstream accepted it, credited back exactly',
    sql: `
      ALTER TABLE orders ADD COLUMN debited_amount REAL;
      -- Orders accepted before this step: the best price known now (what the accounting would
      -- have credited them before it).
      UPDATE orders SET debited_amount = COALESCE(
          amount,
          (SELECT price FROM catalog_products p WHERE p.code = orders.product_code),
          (SELECT price FROM catalog_products p WHERE lower(p.id) = lower(orders.product_id)))
        WHERE submission_state = 'accepted';
    `,
  },
  ...SHARED_MIGRATIONS_FROM_13,
  {
    version: 15,
    description:
      "order_pace_totals: each pace distribution's running total (the SUM of its weights), kept by every sample's write, so a sample no longer sums its distribution's buckets to know when to halve them",
    sql: `
      CREATE TABLE order_pace_totals (
        product_code TEXT NOT NULL,
        state        TEXT NOT NULL,
        total        REAL NOT NULL,
        PRIMARY KEY (product_code, state)
      ) WITHOUT ROWID;
      INSERT INTO order_pace_totals (product_code, state, total)
        SELECT product_code, state, SUM(weight) FROM order_pace GROUP BY product_code, state;
    `,
  },
  {
    version: 16,
    description:
      "orders: the request as it was sent (request), when its first create was sent (first_sent_at), a create whose outcome is in doubt (create_in_doubt_at), the claim's owner (lease_token), and submission_state 'cancelled' (cancel_code, cancel_detail)",
    rebuildsTables: true,
    sql: `
      CREATE TABLE orders_v16 (
        id                 INTEGER PRIMARY KEY,
        partner_ref        TEXT    NOT NULL UNIQUE,
        invoice_number     TEXT    UNIQUE,
        product_code       TEXT,
        product_id         TEXT,
        target_data        TEXT,
        callback_url       TEXT,
        request            TEXT,
        amount             REAL,
        status             TEXT,
        upstream_status    TEXT,
        serial_number      TEXT,
        nickname           TEXT,
        message            TEXT,
        target             TEXT,
        product_name       TEXT,
        created_at         TEXT,
        success_at         TEXT,
        local_created_at   INTEGER NOT NULL,
        updated_at         INTEGER NOT NULL,
        submission_state   TEXT    NOT NULL
          CHECK (submission_state IN ('queued', 'pending', 'accepted', 'rejected', 'unknown', 'blocked', 'cancelled')),
        rejection_code     TEXT,
        rejection_detail   TEXT,
        blocked_code       TEXT,
        blocked_detail     TEXT,
        cancel_code        TEXT,
        cancel_detail      TEXT,
        first_sent_at      INTEGER,
        create_in_doubt_at INTEGER,
        last_polled_at     INTEGER,
        next_poll_at       INTEGER,
        poll_count         INTEGER NOT NULL DEFAULT 0,
        stuck_at           INTEGER,
        final_at           INTEGER,
        poll_leased_until  INTEGER,
        lease_token        TEXT,
        version            INTEGER NOT NULL DEFAULT 0,
        debited_amount     REAL
      );
      -- Orders written before this step: a create went out at the earliest when they were written,
      -- and one whose submission is still open (queued ones too: a pump of before this step sent
      -- them without marking them) may have reached the upstream without a definite answer.
      INSERT INTO orders_v16 (
        id, partner_ref, invoice_number, product_code, product_id, target_data, callback_url,
        amount, status, upstream_status, serial_number, nickname, message, target, product_name,
        created_at, success_at, local_created_at, updated_at, submission_state, rejection_code,
        rejection_detail, blocked_code, blocked_detail, first_sent_at, create_in_doubt_at,
        last_polled_at, next_poll_at, poll_count, stuck_at, final_at, poll_leased_until, version,
        debited_amount)
      SELECT
        id, partner_ref, invoice_number, product_code, product_id, target_data, callback_url,
        amount, status, upstream_status, serial_number, nickname, message, target, product_name,
        created_at, success_at, local_created_at, updated_at, submission_state, rejection_code,
        rejection_detail, blocked_code, blocked_detail,
        local_created_at,
        CASE WHEN submission_state IN ('queued', 'pending', 'unknown', 'blocked') THEN updated_at END,
        last_polled_at, next_poll_at, poll_count, stuck_at, final_at, poll_leased_until, version,
        debited_amount
      FROM orders;
      DROP TABLE orders;
      ALTER TABLE orders_v16 RENAME TO orders;
      CREATE INDEX orders_next_poll_at ON orders (next_poll_at);
      CREATE INDEX orders_status ON orders (status);
      CREATE INDEX orders_local_created_at ON orders (local_created_at);
      CREATE INDEX orders_audit ON orders (MAX(COALESCE(last_polled_at, 0), final_at))
        WHERE status = 'SUCCESS' AND next_poll_at IS NULL;
      CREATE INDEX orders_queued ON orders (id) WHERE submission_state = 'queued';
      CREATE INDEX orders_waiting ON orders (local_created_at) WHERE submission_state IN ('queued', 'blocked');
    `,
  },
  {
    version: 17,
    description:
      "notify_outbox: each shop notification still to deliver (endpoint, feed event, next attempt and when it is due, or NULL while an earlier one of its order is still to deliver; the lease of the process sending it): the one place a delivery's state lives",
    sql: `
      CREATE TABLE notify_outbox (
        endpoint_id  INTEGER  NOT NULL REFERENCES notify_endpoints (id),
        seq          INTEGER  NOT NULL,
        partner_ref  TEXT,
        attempt      INTEGER NOT NULL,
        next_at      INTEGER,
        leased_until INTEGER,
        lease_token  TEXT,
        PRIMARY KEY (endpoint_id, seq)
      ) WITHOUT ROWID;
      CREATE INDEX notify_outbox_order ON notify_outbox (endpoint_id, partner_ref, seq);
      CREATE INDEX notify_outbox_due ON notify_outbox (endpoint_id, next_at);
    `,
  },
  ...SHARED_MIGRATIONS_FROM_18,
  {
    version: 22,
    description:
      'orders.invoice_number unique per upstream (an index on invoice_number, upstream), not over the whole store: two suppliers may issue the same invoice number (docs/upstreams.md)',
    rebuildsTables: true,
    sql: `
      CREATE TABLE orders_v22 (
        id                 INTEGER PRIMARY KEY,
        partner_ref        TEXT    NOT NULL UNIQUE,
        invoice_number     TEXT,
        product_code       TEXT,
        product_id         TEXT,
        target_data        TEXT,
        callback_url       TEXT,
        request            TEXT,
        amount             REAL,
        status             TEXT,
        upstream_status    TEXT,
        serial_number      TEXT,
        nickname           TEXT,
        message            TEXT,
        target             TEXT,
        product_name       TEXT,
        created_at         TEXT,
        success_at         TEXT,
        local_created_at   INTEGER NOT NULL,
        updated_at         INTEGER NOT NULL,
        submission_state   TEXT    NOT NULL
          CHECK (submission_state IN ('queued', 'pending', 'accepted', 'rejected', 'unknown', 'blocked', 'cancelled')),
        rejection_code     TEXT,
        rejection_detail   TEXT,
        blocked_code       TEXT,
        blocked_detail     TEXT,
        cancel_code        TEXT,
        cancel_detail      TEXT,
        first_sent_at      INTEGER,
        create_in_doubt_at INTEGER,
        last_polled_at     INTEGER,
        next_poll_at       INTEGER,
        poll_count         INTEGER NOT NULL DEFAULT 0,
        stuck_at           INTEGER,
        final_at           INTEGER,
        poll_leased_until  INTEGER,
        lease_token        TEXT,
        version            INTEGER NOT NULL DEFAULT 0,
        debited_amount     REAL,
        upstream           TEXT    NOT NULL DEFAULT 'default'
      );
      INSERT INTO orders_v22 (
        id, partner_ref, invoice_number, product_code, product_id, target_data, callback_url,
        request, amount, status, upstream_status, serial_number, nickname, message, target,
        product_name, created_at, success_at, local_created_at, updated_at, submission_state,
        rejection_code, rejection_detail, blocked_code, blocked_detail, cancel_code, cancel_detail,
        first_sent_at, create_in_doubt_at, last_polled_at, next_poll_at, poll_count, stuck_at,
        final_at, poll_leased_until, lease_token, version, debited_amount, upstream)
      SELECT
        id, partner_ref, invoice_number, product_code, product_id, target_data, callback_url,
        request, amount, status, upstream_status, serial_number, nickname, message, target,
        product_name, created_at, success_at, local_created_at, updated_at, submission_state,
        rejection_code, rejection_detail, blocked_code, blocked_detail, cancel_code, cancel_detail,
        first_sent_at, create_in_doubt_at, last_polled_at, next_poll_at, poll_count, stuck_at,
        final_at, poll_leased_until, lease_token, version, debited_amount, upstream
      FROM orders;
      DROP TABLE orders;
      ALTER TABLE orders_v22 RENAME TO orders;
      CREATE UNIQUE INDEX orders_invoice_upstream ON orders (invoice_number, upstream);
      CREATE INDEX orders_next_poll_at ON orders (next_poll_at);
      CREATE INDEX orders_status ON orders (status);
      CREATE INDEX orders_local_created_at ON orders (local_created_at);
      CREATE INDEX orders_audit ON orders (MAX(COALESCE(last_polled_at, 0), final_at))
        WHERE status = 'SUCCESS' AND next_poll_at IS NULL;
      CREATE INDEX orders_queued ON orders (id) WHERE submission_state = 'queued';
      CREATE INDEX orders_waiting ON orders (local_created_at) WHERE submission_state IN ('queued', 'blocked');
    `,
  },
  eventUpstreamStep("instr(event_id, '/')"),
  ...SHARED_MIGRATIONS_FROM_24,
  {
    version: 25,
    description: ATTEMPTS_DESCRIPTION,
    // SQLite drops a foreign key only by rebuilding the table.
    rebuildsTables: true,
    sql: `${ATTEMPTS_SQL}
      CREATE TABLE order_events_v25 (
        id          INTEGER PRIMARY KEY,
        partner_ref TEXT    NOT NULL,
        source      TEXT    NOT NULL CHECK (source IN ('create', 'webhook', 'poll', 'manual')),
        event_id    TEXT,
        status      TEXT,
        payload     TEXT,
        received_at INTEGER NOT NULL,
        applied_at  INTEGER NOT NULL,
        changed     INTEGER NOT NULL CHECK (changed IN (0, 1)),
        reason      TEXT    NOT NULL,
        occurred_at INTEGER,
        upstream    TEXT    NOT NULL DEFAULT 'default'
      );
      INSERT INTO order_events_v25
          (id, partner_ref, source, event_id, status, payload, received_at, applied_at, changed, reason, occurred_at, upstream)
        SELECT id, partner_ref, source, event_id, status, payload, received_at, applied_at, changed, reason, occurred_at, upstream
        FROM order_events;
      DROP TABLE order_events;
      ALTER TABLE order_events_v25 RENAME TO order_events;
      CREATE UNIQUE INDEX order_events_source_upstream_event_id
        ON order_events (source, upstream, event_id) WHERE event_id IS NOT NULL;
      CREATE INDEX order_events_partner_ref ON order_events (partner_ref);
    `,
  },
  ...SHARED_MIGRATIONS_FROM_26,
  {
    version: 27,
    description: ORDER_COUNTS_DESCRIPTION,
    sql: `${ORDER_COUNTS_SQL}
      CREATE TRIGGER orders_counted_insert AFTER INSERT ON orders BEGIN
        INSERT INTO order_counts (upstream, status_key, submission_state, open, stuck, n)
          VALUES (${orderCountKey('NEW').join(', ')}, 1)
          ON CONFLICT (upstream, status_key, submission_state, open, stuck) DO UPDATE SET n = n + 1;
      END;
      CREATE TRIGGER orders_counted_delete AFTER DELETE ON orders BEGIN
        UPDATE order_counts SET n = n - 1
          WHERE (upstream, status_key, submission_state, open, stuck) = (${orderCountKey('OLD').join(', ')});
      END;
      CREATE TRIGGER orders_counted_update AFTER UPDATE OF ${ORDER_COUNT_COLUMNS} ON orders
        WHEN (${orderCountKey('OLD').join(', ')}) IS NOT (${orderCountKey('NEW').join(', ')})
      BEGIN
        UPDATE order_counts SET n = n - 1
          WHERE (upstream, status_key, submission_state, open, stuck) = (${orderCountKey('OLD').join(', ')});
        INSERT INTO order_counts (upstream, status_key, submission_state, open, stuck, n)
          VALUES (${orderCountKey('NEW').join(', ')}, 1)
          ON CONFLICT (upstream, status_key, submission_state, open, stuck) DO UPDATE SET n = n + 1;
      END;
    `,
  },
  ...SHARED_MIGRATIONS_FROM_28,
];
