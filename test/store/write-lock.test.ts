import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { openDatabase } from '../../src/store/database.js';
import { openOrderStore } from '../../src/store/order-store.js';
import { nextMessage, scheduleSettings, snapshot, tempDbPath } from '../helpers/store.js';

const HOLDER = fileURLToPath(new URL('../fixtures/lock-holder-process.ts', import.meta.url));

function holdWriteLock(path: string, holdMs?: number) {
  const args = holdMs === undefined ? [path] : [path, String(holdMs)];
  return fork(HOLDER, args, { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
}

test("a write waits for another process's transaction to commit, then applies after it", async (t) => {
  const path = tempDbPath(t);
  openDatabase({ path }).close();
  const holder = holdWriteLock(path, 300);
  t.after(() => holder.kill());
  await nextMessage(holder);
  const db = openDatabase({ path });
  t.after(() => db.close());
  const store = openOrderStore(db, scheduleSettings());

  const result = store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' });

  assert.equal(result.created, true);
  assert.ok(
    store.queries.getOrder('R1')!.id > store.queries.getOrder('HELD')!.id,
    'the held transaction committed first',
  );
});

test('a write gives up with SQLITE_BUSY once the busy timeout has passed, and the timeout stays as set', async (t) => {
  const path = tempDbPath(t);
  openDatabase({ path }).close();
  const holder = holdWriteLock(path);
  t.after(() => holder.kill());
  await nextMessage(holder);
  const db = openDatabase({ path, busyTimeoutMs: 100 });
  t.after(() => db.close());
  const store = openOrderStore(db, scheduleSettings());

  assert.throws(
    () => store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' }),
    (error: unknown) => (error as { code?: string }).code === 'SQLITE_BUSY',
  );
  assert.equal(db.pragma('busy_timeout', { simple: true }), 100);
  const released = nextMessage(holder);
  holder.send('release');
  await released;
  assert.equal(
    store.writer.applyOrderSnapshot(snapshot('R1', 'PENDING'), { source: 'create' }).created,
    true,
  );
});
