import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { test } from 'node:test';
import postgres from 'postgres';
import { startPostgresServer } from '../../src/dev/postgres-server.js';

/** Whether something could listen on the port on 127.0.0.1 right now. */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

test('a private PostgreSQL server answers queries on its own port, keeps data across pause/resume, and cleans up', async (t) => {
  const server = await startPostgresServer();
  t.after(() => server.stop());
  assert.match(server.url, /^postgres:\/\/h2h@127\.0\.0\.1:\d+\/h2h$/);
  const sql = postgres(server.url, { max: 1, onnotice: () => {} });
  await sql`CREATE TABLE t (id INTEGER PRIMARY KEY, note TEXT NOT NULL)`;
  await sql`INSERT INTO t ${sql({ id: 1, note: 'kept' })}`;
  const [row] = await sql<{ db: string; port: number }[]>`
    SELECT current_database() AS db, inet_server_port() AS port`;
  assert.deepEqual({ ...row }, { db: 'h2h', port: server.port });
  await sql.end();

  await server.pause();
  assert.equal(await portIsFree(server.port), true);
  await server.resume();
  const again = postgres(server.url, { max: 1 });
  t.after(() => again.end());
  assert.deepEqual(
    (await again<{ note: string }[]>`SELECT note FROM t WHERE id = 1`).map((r) => r.note),
    ['kept'],
  );
  await again.end();

  await server.stop();
  assert.equal(existsSync(server.dir), false);
  assert.equal(await portIsFree(server.port), true);
});

test('two private servers run at once on different ports, each with its own data', async (t) => {
  const [a, b] = await Promise.all([startPostgresServer(), startPostgresServer()]);
  t.after(() => Promise.all([a.stop(), b.stop()]));
  assert.notEqual(a.port, b.port);
  assert.notEqual(a.dir, b.dir);
  const sqlA = postgres(a.url, { max: 1, onnotice: () => {} });
  const sqlB = postgres(b.url, { max: 1, onnotice: () => {} });
  t.after(() => Promise.all([sqlA.end(), sqlB.end()]));
  await sqlA`CREATE TABLE only_in_a (x INTEGER)`;
  const [found] = await sqlB<{ n: number }[]>`
    SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'only_in_a'`;
  assert.equal(found?.n, 0);
});
