import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openDatabase } from '../../src/store/database.js';
import { openOrderStore } from '../../src/store/order-store.js';
import { GroupCommit } from '../../src/worker/group-commit.js';
import { scheduleSettings, snapshot, tempDbPath } from '../helpers/store.js';

/** A writer (the worker's connection) and a reader (another process's view) of one file. */
function twoConnections(t: Parameters<typeof tempDbPath>[0], busyTimeoutMs?: number) {
  const path = tempDbPath(t);
  const db = openDatabase({ path, ...(busyTimeoutMs === undefined ? {} : { busyTimeoutMs }) });
  const reader = openDatabase({ path });
  t.after(() => {
    db.close();
    reader.close();
  });
  const visible = (ref: string) =>
    reader.prepare('SELECT COUNT(*) AS n FROM orders WHERE partner_ref = ?').get(ref) as { n: number };
  return {
    db,
    reader,
    store: openOrderStore(db, scheduleSettings()),
    visible: (ref: string) => visible(ref).n === 1,
  };
}

test('each unit is its own savepoint: a failing unit rolls back only its own writes and rejects only its own promise', async (t) => {
  const { db, store, visible } = twoConnections(t);
  const commit = new GroupCommit({ db });
  const results = await Promise.allSettled([
    commit.submit(() =>
      store.writer.applyOrderSnapshot(snapshot('A', 'PENDING'), { source: 'webhook', eventId: 'a' }),
    ),
    commit.submit(() => {
      store.writer.applyOrderSnapshot(snapshot('B', 'PENDING'), { source: 'webhook', eventId: 'b' });
      throw new Error('boom after writing B');
    }),
    commit.submit(() =>
      store.writer.applyOrderSnapshot(snapshot('C', 'PENDING'), { source: 'webhook', eventId: 'c' }),
    ),
  ]);
  assert.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  assert.match(String((results[1] as PromiseRejectedResult).reason), /boom after writing B/);
  assert.deepEqual([visible('A'), visible('B'), visible('C')], [true, false, true]);
  assert.deepEqual(commit.stats, {
    ...commit.stats,
    commits: 1,
    committed: 2,
    failed: 1,
    largestBatch: 3,
  });
});

test('a unit learns of its success only after the batch is committed and visible to other connections', async (t) => {
  const { db, store, visible } = twoConnections(t);
  const commit = new GroupCommit({ db });
  const seenAtResolution = commit
    .submit(() =>
      store.writer.applyOrderSnapshot(snapshot('D', 'PENDING'), { source: 'webhook', eventId: 'd' }),
    )
    .then(() => visible('D'));
  assert.equal(visible('D'), false, 'nothing runs before the next turn of the event loop');
  assert.equal(commit.pending, 1);
  assert.equal(await seenAtResolution, true);
});

test('a batch commits at once when it reaches its maximum size', (t) => {
  const { db, store, visible } = twoConnections(t);
  const commit = new GroupCommit({ db, maxBatchSize: 2 });
  void commit.submit(() =>
    store.writer.applyOrderSnapshot(snapshot('E', 'PENDING'), { source: 'webhook', eventId: 'e' }),
  );
  assert.equal(visible('E'), false);
  void commit.submit(() =>
    store.writer.applyOrderSnapshot(snapshot('F', 'PENDING'), { source: 'webhook', eventId: 'f' }),
  );
  assert.deepEqual([visible('E'), visible('F'), commit.pending], [true, true, 0]);
});

test('a batch that cannot take the write lock fails as a whole, writes nothing, and can be submitted again', async (t) => {
  const { db, reader, store, visible } = twoConnections(t, 50);
  const commit = new GroupCommit({ db });
  reader.exec('BEGIN IMMEDIATE');
  const units = ['G', 'H'].map((ref) =>
    commit.submit(() =>
      store.writer.applyOrderSnapshot(snapshot(ref, 'PENDING'), { source: 'webhook', eventId: ref }),
    ),
  );
  const outcomes = await Promise.allSettled(units);
  reader.exec('COMMIT');
  for (const outcome of outcomes) {
    assert.equal(outcome.status, 'rejected');
    assert.equal((outcome as PromiseRejectedResult).reason.code, 'SQLITE_BUSY');
  }
  assert.deepEqual([visible('G'), visible('H')], [false, false]);

  await commit.submit(() =>
    store.writer.applyOrderSnapshot(snapshot('G', 'PENDING'), { source: 'webhook', eventId: 'G' }),
  );
  assert.equal(visible('G'), true);
});

test('a maximum batch size below 1 is refused at construction', (t) => {
  const { db } = twoConnections(t);
  assert.throws(
    () => new GroupCommit({ db, maxBatchSize: 0 }),
    /maxBatchSize must be a whole number ≥ 1, got 0/,
  );
});
