/**
 * One step of the schema. Once released, a migration is never edited: add the next one. Each
 * backend lists its steps (sqlite/migrations.ts, postgres/migrations.ts, the shared ones in
 * shared-migrations.ts), and `runMigrations` (../migrations.ts) applies them.
 */
export interface Migration {
  /** 1, 2, 3 …: the schema version the database has after this step. */
  version: number;
  description: string;
  sql: string;
  /**
   * SQLite only: the step rebuilds a table that others reference (SQLite cannot change a CHECK
   * constraint in place): it runs with foreign keys off, as SQLite's documented table rebuild
   * requires, and `PRAGMA foreign_key_check` must find nothing before it commits.
   */
  rebuildsTables?: boolean;
}
