import type { TestContext } from 'node:test';
import { type PostgresServer, startPostgresServer } from '../../src/dev/postgres-server.js';

/** Starts a private PostgreSQL server for one test (or suite) and stops it when the test ends. */
export async function privatePostgres(t: Pick<TestContext, 'after'>): Promise<PostgresServer> {
  const server = await startPostgresServer();
  t.after(() => server.stop());
  return server;
}
