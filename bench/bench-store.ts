// The store a bench runs on (`--store sqlite|postgres|both`): a SQLite file in the bench's
// directory, or a private PostgreSQL server whose cluster is in that directory too, so both sit on
// the project's disk and pay the commit costs production pays (fsync on for both).
import { chmodSync } from 'node:fs';
import { join } from 'node:path';
import { startPostgresServer } from '../src/dev/postgres-server.js';
import { sqliteUrl } from '../src/store/open-store.js';

export type BenchStoreKind = 'sqlite' | 'postgres';

/** `--store`'s value as the backends to run, in order: `sqlite`, `postgres` or `both`. */
export function benchStoreKinds(flag: string): BenchStoreKind[] {
  if (flag === 'both') return ['sqlite', 'postgres'];
  if (flag === 'sqlite' || flag === 'postgres') return [flag];
  throw new Error(`--store must be sqlite, postgres or both, got ${JSON.stringify(flag)}`);
}

/** A new, empty store of `kind` under `dir`: its URL, and `stop()` for its server (if any). */
export async function benchStore(
  kind: BenchStoreKind,
  dir: string,
): Promise<{ url: string; stop: () => Promise<void> }> {
  if (kind === 'sqlite') return { url: sqliteUrl(join(dir, 'h2h-sync.db')), stop: async () => {} };
  // The server may run as another account (PostgreSQL refuses root): it must be able to reach
  // its directory through the bench's (mkdtemp makes it 0700).
  chmodSync(dir, 0o711);
  const server = await startPostgresServer({ dir: join(dir, 'postgres') });
  return { url: server.url, stop: () => server.stop() };
}
