import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SqlExecutor } from '../../src/store/sql/executor.js';
import { applyCommit } from '../../src/worker/event-worker.js';
import { GroupCommit } from '../../src/worker/group-commit.js';
import { openTestStore, otherConnection, scheduleSettings, snapshot, tempDbPath } from '../helpers/store.js';

/** A store (the worker's) and a reader (another process's view) of one file. */
async function storeAndReader(t: Parameters<typeof tempDbPath>[0], lockTimeoutMs?: number) {
  const path = tempDbPath(t);
  const store = await openTestStore(
    path,
    scheduleSettings(),
    lockTimeoutMs === undefined ? {} : { lockTimeoutMs },
  );
  const reader = await otherConnection(path);
  t.after(async () => {
    await store.close();
    reader.close();
  });
  const visible = (ref: string) =>
    (reader.prepare('SELECT COUNT(*) AS n FROM orders WHERE partner_ref = ?').get(ref) as { n: number }).n ===
    1;
  return { store, reader, visible };
}

const webhook = (ref: string) => ({
  snapshot: snapshot(ref, 'PENDING'),
  options: { source: 'webhook' as const, eventId: ref },
});

test('each item is its own savepoint: a failing one rolls back only its own writes and rejects only its own promise', async (t) => {
  const { store, visible } = await storeAndReader(t);
  // Units that write an order, then throw for B: through the store's writeBatch, as applyBatch runs.
  const commit = new GroupCommit<string, string>({
    runBatch: (refs) =>
      store.db.writeBatch(
        refs.map((ref) => async (tx: SqlExecutor) => {
          await tx.run(
            `INSERT INTO orders (partner_ref, local_created_at, updated_at, submission_state)
             VALUES (@ref, 1, 1, 'pending')`,
            { ref },
          );
          if (ref === 'B') throw new Error('boom after writing B');
          return ref;
        }),
      ),
  });
  const results = await Promise.allSettled(['A', 'B', 'C'].map((ref) => commit.submit(ref)));
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

test('an event that can never apply fails alone in the writer’s batch; the others commit', async (t) => {
  const { store, visible } = await storeAndReader(t);
  const commit = applyCommit(store.writer);
  const noStatus = {
    snapshot: { ...snapshot('Y', 'PENDING'), status: undefined as unknown as string },
    options: { source: 'webhook' as const, eventId: 'y' },
  };
  const results = await Promise.allSettled([
    commit.submit(webhook('X')),
    commit.submit(noStatus),
    commit.submit(webhook('Z')),
  ]);
  assert.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  assert.equal((results[1] as PromiseRejectedResult).reason.code, 'INVALID_SNAPSHOT');
  assert.deepEqual([visible('X'), visible('Y'), visible('Z')], [true, false, true]);
  assert.equal(commit.stats.commits, 1);
});

test('an item learns of its success only after the batch is committed and visible to other connections', async (t) => {
  const { store, visible } = await storeAndReader(t);
  const commit = applyCommit(store.writer);
  const seenAtResolution = commit.submit(webhook('D')).then(() => visible('D'));
  assert.equal(visible('D'), false, 'nothing runs before the next turn of the event loop');
  assert.equal(commit.pending, 1);
  assert.equal(await seenAtResolution, true);
});

test('a batch starts at once when it reaches its maximum size, without waiting for the next turn of the event loop', async (t) => {
  const { store, visible } = await storeAndReader(t);
  const commit = applyCommit(store.writer, { maxBatchSize: 2 });
  const first = commit.submit(webhook('E'));
  assert.equal(commit.pending, 1);
  const second = commit.submit(webhook('F'));
  assert.equal(commit.pending, 0, 'the batch was taken at the second submit');
  await Promise.all([first, second]);
  assert.deepEqual([visible('E'), visible('F')], [true, true]);
  assert.equal(commit.stats.commits, 1);
});

test('a batch that cannot take the write lock fails as a whole, writes nothing, and can be submitted again', async (t) => {
  const { store, reader, visible } = await storeAndReader(t, 50);
  const commit = applyCommit(store.writer);
  reader.exec('BEGIN IMMEDIATE');
  const units = ['G', 'H'].map((ref) => commit.submit(webhook(ref)));
  const outcomes = await Promise.allSettled(units);
  reader.exec('COMMIT');
  for (const outcome of outcomes) {
    assert.equal(outcome.status, 'rejected');
    assert.equal((outcome as PromiseRejectedResult).reason.code, 'SQLITE_BUSY');
  }
  assert.deepEqual([visible('G'), visible('H')], [false, false]);

  await commit.submit(webhook('G'));
  assert.equal(visible('G'), true);
});

test('a maximum batch size below 1 is refused at construction', async (t) => {
  const { store } = await storeAndReader(t);
  assert.throws(
    () => applyCommit(store.writer, { maxBatchSize: 0 }),
    /maxBatchSize must be a whole number ≥ 1, got 0/,
  );
});
