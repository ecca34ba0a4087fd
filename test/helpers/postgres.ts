import type { TestContext } from 'node:test';
import { type PostgresServer, startPostgresServer } from '../../src/dev/postgres-server.js';
import { type PostgresPair, startPostgresPair } from '../../src/dev/postgres-standby.js';

/**
 * Starts a private PostgreSQL server for the tests of this process, from the test runner's
 * template cluster when it made one (scripts/run-tests.mjs: one `initdb` a run), else with `initdb`.
 */
export function startTestPostgres(): Promise<PostgresServer> {
  const template = process.env.H2H_TEST_POSTGRES_TEMPLATE;
  return startPostgresServer(template ? { template } : {});
}

/** Starts a private PostgreSQL server for one test (or suite) and stops it when the test ends. */
export async function privatePostgres(t: Pick<TestContext, 'after'>): Promise<PostgresServer> {
  const server = await startTestPostgres();
  t.after(() => server.stop());
  return server;
}

/**
 * Starts a private primary and a synchronous streaming standby of it (postgres-standby.ts) and
 * stops both when the test ends.
 */
export async function privatePostgresPair(t: Pick<TestContext, 'after'>): Promise<PostgresPair> {
  const pair = await startPostgresPair();
  t.after(() => pair.stop());
  return pair;
}

/** `url` (one server's) listing `ports` on 127.0.0.1 in that order, with `target_session_attrs`. */
export function multiHostUrl(url: string, ports: readonly number[], attrs = 'read-write'): string {
  const parsed = new URL(url);
  const hosts = ports.map((port) => `127.0.0.1:${port}`).join(',');
  return `postgres://${parsed.username}:${parsed.password}@${hosts}${parsed.pathname}?target_session_attrs=${attrs}`;
}
