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
];
