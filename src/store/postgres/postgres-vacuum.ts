import postgres from 'postgres';
import { driverSessionAttrs } from '../store-url.js';

/**
 * `store vacuum` on PostgreSQL (docs/store.md, "Vacuum"): `VACUUM (ANALYZE)` of the store's
 * database, on a connection of its own (VACUUM cannot run inside a transaction, and every
 * statement of the store's runs in one). It takes no lock that stops the apps' reads or writes:
 * it marks the space of deleted rows reusable and refreshes the planner's figures, which
 * autovacuum also does on its own schedule. The files shrink only with `VACUUM FULL`, which locks
 * each table while it rewrites it: not run here.
 */
export async function vacuumPostgresStore(
  url: string,
): Promise<{ bytesBefore: number; bytesAfter: number; durationMs: number }> {
  const sessionAttrs = driverSessionAttrs(url);
  const sql = postgres(url, {
    max: 1,
    onnotice: () => {},
    fetch_types: false,
    // On the primary of a multi-host URL, as the store's own connections (store-url.ts): the
    // driver's own `read-write` check would take a hot standby, where VACUUM fails.
    ...(sessionAttrs === undefined ? {} : { target_session_attrs: sessionAttrs }),
    connection: { application_name: 'h2h-sync cli' },
  });
  try {
    const size = async () => Number((await sql`SELECT pg_database_size(current_database()) AS n`)[0]?.n ?? 0);
    const bytesBefore = await size();
    const started = performance.now();
    await sql.unsafe('VACUUM (ANALYZE)');
    const durationMs = Math.round(performance.now() - started);
    return { bytesBefore, bytesAfter: await size(), durationMs };
  } finally {
    await sql.end({ timeout: 5 });
  }
}
