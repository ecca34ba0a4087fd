// `h2h-sync store backup PATH` and `store vacuum` (docs/store.md, "Backups" and "Vacuum"): a
// consistent copy of a SQLite store taken while another process writes to it, and the space of
// pruned history given back.
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import BetterSqlite3 from 'better-sqlite3';
import { LATEST_SCHEMA_VERSION } from '../../src/store/migrations.js';
import { openStore, sqliteUrl } from '../../src/store/open-store.js';
import { backupSqliteStore } from '../../src/store/sqlite/sqlite-backup.js';
import { planSqliteVacuum, vacuumSqliteStore } from '../../src/store/sqlite/sqlite-vacuum.js';
import { runRetentionPass } from '../../src/worker/store-retention.js';
import { runCli } from '../helpers/cli.js';
import { FIXTURE_EXEC_ARGV } from '../helpers/fixture-process.js';
import { nextMessage, otherConnection, snapshot, tempStore } from '../helpers/store.js';
import { storeBackends } from '../helpers/store-backends.js';

const WRITER = fileURLToPath(new URL('../fixtures/order-writer-process.ts', import.meta.url));
const DAY = 86_400_000;

/** `PRAGMA integrity_check` of the file at `path`, opened read-only. */
function integrityCheck(path: string): string {
  const db = new BetterSqlite3(path, { readonly: true, fileMustExist: true });
  try {
    return String(db.pragma('integrity_check', { simple: true }));
  } finally {
    db.close();
  }
}

describe('store backup', () => {
  test('a backup taken while another process writes orders is a whole store of the current schema, its orders a prefix of those written', async (t) => {
    const { store, path } = await tempStore(t);
    for (let i = 1; i <= 400; i++) {
      await store.writer.applyOrderSnapshot(snapshot(`P-${i}`, 'SUCCESS', { serial_number: `S${i}` }), {
        source: 'webhook',
        eventId: `p-${i}`,
      });
    }
    const writer = fork(WRITER, [sqliteUrl(path)], { execArgv: FIXTURE_EXEC_ARGV, stdio: 'inherit' });
    t.after(() => {
      if (writer.exitCode === null) writer.kill();
    });
    assert.equal(await nextMessage<string>(writer), 'ready');
    writer.send('go');
    await nextMessage<{ written: number }>(writer);

    const destination = join(dirname(path), 'copy.db');
    const progress: number[] = [];
    // Small steps, and a write of another connection after each: SQLite starts the copy again at
    // every step, so only copying the rest at once can finish it.
    const other = await otherConnection(path);
    t.after(() => other.close());
    const touch = other.prepare("UPDATE orders SET poll_count = poll_count + 1 WHERE partner_ref = 'P-1'");
    const summary = await backupSqliteStore({
      source: path,
      destination,
      stepPages: 4,
      onProgress: (p) => {
        progress.push(p.remainingPages);
        touch.run();
      },
    });
    const stopped = nextMessage<{ written: number }>(writer);
    writer.send('stop');
    const { written } = await stopped;

    assert.ok(progress.length > 1, 'progress was reported step by step');
    assert.ok(summary.restarts >= 1, 'started again, then copied at once');
    assert.equal(integrityCheck(destination), 'ok');
    assert.equal(summary.quickCheck, 'ok');
    assert.equal(summary.schemaVersion, LATEST_SCHEMA_VERSION);
    assert.equal(summary.bytes, statSync(destination).size);
    assert.ok(!existsSync(`${destination}.partial`));

    const copy = await openStore(sqliteUrl(destination), { role: 'test', mustExist: true });
    t.after(() => copy.close());
    const refs = (
      await copy.db.all<{ partner_ref: string }>('SELECT partner_ref FROM orders ORDER BY id')
    ).map((r) => r.partner_ref);
    const copied = refs.filter((r) => r.startsWith('W-'));
    assert.equal(refs.length - copied.length, 400, 'every order written before');
    assert.ok(copied.length >= 1 && copied.length <= written, `${copied.length} of ${written}`);
    assert.deepEqual(
      copied,
      Array.from({ length: copied.length }, (_, i) => `W-${i + 1}`),
      'the orders of a prefix of the commits, none missing inside it',
    );
    assert.equal(summary.orders, refs.length);
    for (const table of ['order_events', 'feed_events']) {
      const n = await copy.db.get<{ n: number }>(
        `SELECT COUNT(*) AS n FROM ${table} WHERE partner_ref LIKE 'W-%'`,
      );
      assert.equal(Number(n?.n), copied.length, `each copied order with its row of ${table}: one commit`);
    }
  });

  test('the command prints a summary, refuses an existing PATH unless --force, and names pg_dump on PostgreSQL', async (t) => {
    const { store, path } = await tempStore(t);
    for (const ref of ['A', 'B', 'C']) {
      await store.writer.applyOrderSnapshot(snapshot(ref, 'PENDING'), { source: 'create' });
    }
    const destination = join(dirname(path), 'h2h-backup.db');
    const env = { H2H_DB_PATH: path };

    const first = await runCli(['store', 'backup', destination], env);
    assert.equal(first.code, 0, first.stderr);
    assert.match(
      first.stdout,
      /Backed up 3 orders \(schema \d+, .* MB, .* pages\) to .*h2h-backup\.db .*quick_check ok/,
    );
    assert.equal(integrityCheck(destination), 'ok');

    const again = await runCli(['store', 'backup', destination], env);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /h2h-backup\.db exists: give a new PATH, or --force to replace it/);

    await store.writer.applyOrderSnapshot(snapshot('D', 'PENDING'), { source: 'create' });
    const forced = await runCli(['store', 'backup', destination, '--force', '--json'], env);
    assert.equal(forced.code, 0, forced.stderr);
    const summary = JSON.parse(forced.stdout);
    assert.deepEqual(
      [summary.path, summary.orders, summary.quick_check, summary.schema_version],
      [destination, 4, 'ok', LATEST_SCHEMA_VERSION],
    );
    assert.equal(typeof summary.duration_ms, 'number');

    const [pg] = storeBackends({ H2H_TEST_STORE: 'postgres' });
    const { url } = await pg!.tempStore(t);
    const onPostgres = await runCli(['store', 'backup', join(destination, '..', 'pg.db'), '--json'], {
      H2H_DB_URL: url,
    });
    assert.equal(onPostgres.code, 2);
    const { error } = JSON.parse(onPostgres.stdout);
    assert.equal(error.code, 'NOT_SQLITE_STORE');
    assert.match(error.message, /pg_dump -Fc .*pg_basebackup with WAL archiving/);
  });
});

describe('store vacuum', () => {
  test('after the history retention, a vacuum gives the space back and leaves a whole store', async (t) => {
    const { store, path, clock } = await tempStore(t);
    const payload = { note: 'x'.repeat(2000) };
    for (let i = 1; i <= 300; i++) {
      for (const [n, status] of ['PENDING', 'PROCESSING', 'SUCCESS'].entries()) {
        await store.writer.applyOrderSnapshot(
          snapshot(`V-${i}`, status, status === 'SUCCESS' ? { serial_number: `S${i}` } : {}),
          { source: 'webhook', eventId: `v-${i}-${n}`, payload },
        );
      }
    }
    clock.advance(100 * DAY);
    const pass = await runRetentionPass(store, { feedRetentionMs: 30 * DAY, historyRetentionMs: 90 * DAY });
    assert.equal(pass.orderEvents, 900);
    await store.close();

    const run = await runCli(['store', 'vacuum', '--json'], { H2H_DB_PATH: path });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /VACUUM holds the write lock until it ends: stop the worker and the api first/);
    const summary = JSON.parse(run.stdout);
    assert.equal(summary.backend, 'sqlite');
    assert.ok(
      summary.bytes_after < summary.bytes_before / 2,
      `${summary.bytes_before} → ${summary.bytes_after} bytes`,
    );
    assert.equal(summary.bytes_after, statSync(path).size, 'the log truncated');
    assert.equal(integrityCheck(path), 'ok');
    const reopened = await openStore(sqliteUrl(path), { role: 'test', mustExist: true });
    t.after(() => reopened.close());
    assert.equal((await reopened.queries.getPublicOrder('V-300'))?.serial_number, 'S300');
  });

  test('a disk without room for the rewrite is refused before anything changes, naming the amounts', async (t) => {
    const { store, path } = await tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('A', 'PENDING'), { source: 'create' });
    const plan = planSqliteVacuum(path);
    const before = statSync(path).size;
    assert.throws(
      () => vacuumSqliteStore({ ...plan, availableBytes: plan.neededBytes - 1 }),
      (err: { code?: string; message?: string }) =>
        err.code === 'NOT_ENOUGH_DISK' &&
        /VACUUM needs about .* MB free beside .* its file system has .* MB: free some space/.test(
          err.message ?? '',
        ),
    );
    assert.equal(statSync(path).size, before);
  });

  test('on PostgreSQL it runs VACUUM (ANALYZE) while the store stays open', async (t) => {
    const [pg] = storeBackends({ H2H_TEST_STORE: 'postgres' });
    const { store, url } = await pg!.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('A', 'PENDING'), { source: 'create' });
    const run = await runCli(['store', 'vacuum', '--json'], { H2H_DB_URL: url });
    assert.equal(run.code, 0, run.stderr);
    const summary = JSON.parse(run.stdout);
    assert.equal(summary.backend, 'postgres');
    assert.ok(summary.bytes_after > 0);
    const analyzed = await store.db.get<{ n: number }>(
      "SELECT COUNT(*) AS n FROM pg_stat_user_tables WHERE relname = 'orders' AND last_analyze IS NOT NULL",
    );
    assert.equal(Number(analyzed?.n), 1, 'the orders table analyzed');
  });
});
