import type { SqlExecutor, StoreDb } from './sql/executor.js';
import type { Migration } from './sql/migration.js';
import { SQLITE_MIGRATIONS } from './sqlite/migrations.js';
import { StoreError } from './store-error.js';

/**
 * The schema version this code writes and understands: the last migration's. Every backend's
 * list of steps ends at it (one numbering: docs/store-backends.md, "Migrations").
 */
export const LATEST_SCHEMA_VERSION = SQLITE_MIGRATIONS.at(-1)!.version;
// (postgres/migrations.ts ends at the same version: test/store/schema-parity.test.ts.)

async function schemaVersion(ex: SqlExecutor): Promise<number> {
  const row = await ex.get<{ version: number }>(ex.dialect.schemaVersionSql);
  return row?.version ?? 0;
}

function refuseNewer(label: string, version: number): void {
  if (version > LATEST_SCHEMA_VERSION) {
    throw new StoreError(
      'DATABASE_TOO_NEW',
      `${label} has schema version ${version}, but this h2h-sync knows only up to ` +
        `${LATEST_SCHEMA_VERSION}: run the newer h2h-sync that wrote it, or point H2H_DB_URL ` +
        '(H2H_DB_PATH) at another store',
    );
  }
}

/**
 * Brings the database up to the last of `steps`, one write transaction per step, so a crash
 * leaves it at a whole version and a second process starting at the same time waits for the
 * write lock and then finds the step already done (the version is read again inside it).
 * Idempotent. Throws `DATABASE_TOO_NEW` for a store migrated by newer code; `label` names the
 * store in that message (never a password). Returns the versions before and after.
 */
export async function runMigrations(
  db: StoreDb,
  steps: readonly Migration[],
  label: string,
): Promise<{ from: number; to: number }> {
  const from = await schemaVersion(db);
  refuseNewer(label, from);
  for (const step of steps) {
    if (step.version <= from) continue;
    await db.write(
      async (tx) => {
        if (tx.dialect.migrationLockSql) await tx.run(tx.dialect.migrationLockSql);
        // Re-read inside the write lock: another process may have applied it since.
        const current = await schemaVersion(tx);
        refuseNewer(label, current);
        if (current >= step.version) return;
        await tx.exec(step.sql);
        if (step.rebuildsTables) {
          const broken = await tx.all('PRAGMA foreign_key_check');
          if (broken.length > 0) {
            throw new Error(`migration ${step.version} broke ${broken.length} foreign keys; rolled back`);
          }
        }
        await tx.exec(tx.dialect.setSchemaVersionSql(step.version));
      },
      { rebuildsTables: step.rebuildsTables === true },
    );
  }
  return { from, to: await schemaVersion(db) };
}
