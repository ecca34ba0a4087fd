import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import { GroupCommit } from '../../src/shared/group-commit.js';
import type { SqlExecutor } from '../../src/store/sql/executor.js';
import { applyCommit } from '../../src/worker/event-worker.js';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend, type StoreBackend } from '../helpers/store-backends.js';

/**
 * A store (the worker's) and a reader: another store on the same database, as another process
 * sees it, so `visible` shows only what was committed.
 */
async function storeAndReader(backend: StoreBackend, t: TestContext, lockTimeoutMs?: number) {
  const { store, url } = await backend.tempStore(t, lockTimeoutMs === undefined ? {} : { lockTimeoutMs });
  const reader = await backend.open(t, url);
  // One statement per ref through the reader's executor (a lookup by invoice number too, as
  // getOrder does, would be a second round trip on PostgreSQL, read later).
  const found = async (ref: string) =>
    (await reader.db.get('SELECT 1 AS found FROM orders WHERE partner_ref = @ref', { ref })) !== undefined;
  /** Whether each of `refs` is committed, as another process sees it. */
  const visible = (...refs: string[]) => Promise.all(refs.map(found));
  return { store, url, visible };
}

const webhook = (ref: string) => ({
  snapshot: snapshot(ref, 'PENDING'),
  options: { source: 'webhook' as const, eventId: ref },
});

describeEachBackend('group commit', (backend) => {
  test('each item is its own savepoint: a failing one rolls back only its own writes and rejects only its own promise', async (t) => {
    const { store, visible } = await storeAndReader(backend, t);
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
    assert.deepEqual(await visible('A', 'B', 'C'), [true, false, true]);
    assert.deepEqual(commit.stats, {
      ...commit.stats,
      commits: 1,
      committed: 2,
      failed: 1,
      largestBatch: 3,
    });
  });

  test('an event that can never apply fails alone in the writer’s batch; the others commit', async (t) => {
    const { store, visible } = await storeAndReader(backend, t);
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
    assert.deepEqual(await visible('X', 'Y', 'Z'), [true, false, true]);
    assert.equal(commit.stats.commits, 1);
  });

  test('an item learns of its success only after the batch is committed and visible to other connections', async (t) => {
    const { store, visible } = await storeAndReader(backend, t);
    const commit = applyCommit(store.writer);
    const seenAtResolution = commit.submit(webhook('D')).then(() => visible('D'));
    // Read in this turn of the event loop, before the batch can start (it starts in the next).
    const seenBefore = visible('D');
    assert.equal(commit.pending, 1);
    assert.deepEqual(await seenBefore, [false], 'nothing runs before the next turn of the event loop');
    assert.deepEqual(await seenAtResolution, [true]);
  });

  test('a batch starts at once when it reaches its maximum size, without waiting for the next turn of the event loop', async (t) => {
    const { store, visible } = await storeAndReader(backend, t);
    const commit = applyCommit(store.writer, { maxBatchSize: 2 });
    const first = commit.submit(webhook('E'));
    assert.equal(commit.pending, 1);
    const second = commit.submit(webhook('F'));
    assert.equal(commit.pending, 0, 'the batch was taken at the second submit');
    await Promise.all([first, second]);
    assert.deepEqual(await visible('E', 'F'), [true, true]);
    assert.equal(commit.stats.commits, 1);
  });

  test('a batch that cannot take the write lock fails as a whole, writes nothing, and can be submitted again', async (t) => {
    const { store, url, visible } = await storeAndReader(backend, t, 50);
    const commit = applyCommit(store.writer);
    const lock = await backend.holdWriteLock(t, url);
    const units = ['G', 'H'].map((ref) => commit.submit(webhook(ref)));
    const outcomes = await Promise.allSettled(units);
    await lock.release();
    for (const outcome of outcomes) {
      assert.equal(outcome.status, 'rejected');
      assert.equal((outcome as PromiseRejectedResult).reason.code, backend.busyCode);
    }
    assert.deepEqual(await visible('G', 'H'), [false, false]);

    await commit.submit(webhook('G'));
    assert.deepEqual(await visible('G'), [true]);
  });

  test('a maximum batch size below 1 is refused at construction', async (t) => {
    const { store } = await storeAndReader(backend, t);
    assert.throws(
      () => applyCommit(store.writer, { maxBatchSize: 0 }),
      /maxBatchSize must be a whole number ≥ 1, got 0/,
    );
  });
});
