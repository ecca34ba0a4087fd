import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { openStore, sqliteUrl } from '../../src/store/open-store.js';
import { FIXTURE_EXEC_ARGV } from '../helpers/fixture-process.js';
import { nextMessage, otherConnection, snapshot, tempDbPath } from '../helpers/store.js';

const HOLDER = fileURLToPath(new URL('../fixtures/lock-holder-process.ts', import.meta.url));

function holdWriteLock(path: string, holdMs?: number) {
  const args = holdMs === undefined ? [path] : [path, String(holdMs)];
  return fork(HOLDER, args, { execArgv: FIXTURE_EXEC_ARGV, stdio: 'inherit' });
}

test("a write waits for another process's transaction to commit, then applies after it", async (t) => {
  const path = tempDbPath(t);
  (await otherConnection(path)).close();
  const holder = holdWriteLock(path, 300);
  t.after(() => holder.kill());
  await nextMessage(holder);
  // Opened as the API opens it: no write at opening, so the apply below is the one that waits.
  const store = await openStore(sqliteUrl(path), { role: 'test' });
  t.after(() => store.close());

  const result = await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });

  assert.equal(result.created, true);
  assert.ok(
    (await store.queries.getOrder('R1'))!.id > (await store.queries.getOrder('HELD'))!.id,
    'the held transaction committed first',
  );
});

test('a write gives up with SQLITE_BUSY once the lock timeout has passed, and the busy timeout stays as set', async (t) => {
  const path = tempDbPath(t);
  (await otherConnection(path)).close();
  const holder = holdWriteLock(path);
  t.after(() => holder.kill());
  await nextMessage(holder);
  const store = await openStore(sqliteUrl(path), { role: 'test', lockTimeoutMs: 100 });
  t.after(() => store.close());

  await assert.rejects(
    store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' }),
    (error: unknown) => (error as { code?: string }).code === 'SQLITE_BUSY',
  );
  assert.equal(store.sqlite!.pragma('busy_timeout', { simple: true }), 100);
  const released = nextMessage(holder);
  holder.send('release');
  await released;
  assert.equal(
    (await store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' })).created,
    true,
  );
});
