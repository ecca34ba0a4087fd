import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import postgres from 'postgres';
import {
  makePostgresTemplate,
  type PostgresServer,
  startPostgresServer,
} from '../../src/dev/postgres-server.js';

/** Whether something could listen on the port on 127.0.0.1 right now. */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

/** Asserts that a table made on server `a` is not on server `b`: each has its own cluster. */
async function assertOwnData(t: TestContext, a: PostgresServer, b: PostgresServer): Promise<void> {
  const sqlA = postgres(a.url, { max: 1, onnotice: () => {} });
  const sqlB = postgres(b.url, { max: 1, onnotice: () => {} });
  t.after(() => Promise.all([sqlA.end(), sqlB.end()]));
  await sqlA`CREATE TABLE only_in_a (x INTEGER)`;
  const [found] = await sqlB<{ n: number }[]>`
    SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'only_in_a'`;
  assert.equal(found?.n, 0);
}

test('a private PostgreSQL server answers queries on its own port, keeps data across pause/resume, and cleans up', async (t) => {
  const server = await startPostgresServer();
  t.after(() => server.stop());
  assert.match(server.url, /^postgres:\/\/h2h:[\w-]{24}@127\.0\.0\.1:\d+\/h2h$/);
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

test('the private server refuses a TCP client without its password (another local user cannot use it)', async (t) => {
  const server = await startPostgresServer();
  t.after(() => server.stop());
  const url = new URL(server.url);
  const wrong = (password: string) =>
    postgres({ host: '127.0.0.1', port: server.port, username: 'h2h', password, database: 'h2h', max: 1 });
  for (const password of ['', 'not-the-password']) {
    const sql = wrong(password);
    t.after(() => sql.end());
    await assert.rejects(sql`SELECT 1`, /password authentication failed|password/i);
  }
  const right = wrong(decodeURIComponent(url.password));
  t.after(() => right.end());
  assert.deepEqual([...(await right<{ one: number }[]>`SELECT 1 AS one`)], [{ one: 1 }]);
});

test('two private servers run at once on different ports, each with its own data', async (t) => {
  const [a, b] = await Promise.all([startPostgresServer(), startPostgresServer()]);
  t.after(() => Promise.all([a.stop(), b.stop()]));
  assert.notEqual(a.port, b.port);
  assert.notEqual(a.dir, b.dir);
  await assertOwnData(t, a, b);
});

test('servers copied from one template cluster (one initdb for many) each run on their own port with their own data, behind its password', async (t) => {
  const template = mkdtempSync(join(tmpdir(), 'h2h-template-test-'));
  t.after(() => rmSync(template, { recursive: true, force: true }));
  makePostgresTemplate(template);
  const [a, b] = await Promise.all([startPostgresServer({ template }), startPostgresServer({ template })]);
  t.after(() => Promise.all([a.stop(), b.stop()]));
  assert.notEqual(a.port, b.port);
  const password = readFileSync(join(template, 'password'), 'utf8');
  assert.equal(decodeURIComponent(new URL(a.url).password), password);
  await assertOwnData(t, a, b);
  assert.equal(existsSync(join(template, 'data', 'postmaster.pid')), false, 'the template itself never runs');
});
