import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { settlesWithin, withDeadline } from '../../src/shared/deadline.js';

/** A promise settled by hand, to decide the race's winner without timing. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const HOUR_MS = 3_600_000;
const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

/** Collects the unhandled rejections of the process while `run` and one more event-loop turn last. */
async function unhandledRejectionsDuring(run: () => Promise<void>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const onRejection = (reason: unknown) => seen.push(reason);
  process.on('unhandledRejection', onRejection);
  try {
    await run();
    await nextTurn();
  } finally {
    process.off('unhandledRejection', onRejection);
  }
  return seen;
}

describe('withDeadline', () => {
  test('settles as the work does when it settles first, and clears its timer', async () => {
    const before = timers();
    assert.equal(await withDeadline(Promise.resolve('done'), HOUR_MS, () => new Error('late')), 'done');
    await assert.rejects(
      withDeadline(Promise.reject(new Error('refused')), HOUR_MS, () => new Error('late')),
      /refused/,
    );
    assert.equal(timers(), before, 'no timer is left behind');
  });

  test('rejects with the timeout error when the deadline comes first; a later rejection of the work is not unhandled', async () => {
    const work = deferred<string>();
    const unhandled = await unhandledRejectionsDuring(async () => {
      await assert.rejects(
        withDeadline(work.promise, 1, () => new Error('no answer within 1 ms')),
        /no answer within 1 ms/,
      );
      work.reject(new Error('refused after the deadline'));
    });
    assert.deepEqual(unhandled, []);
  });
});

describe('settlesWithin', () => {
  test('is true when the work resolves or rejects in time, and clears its timer', async () => {
    const before = timers();
    assert.equal(await settlesWithin(Promise.resolve(), HOUR_MS), true);
    assert.equal(await settlesWithin(Promise.reject(new Error('refused')), HOUR_MS), true);
    assert.equal(timers(), before, 'no timer is left behind');
  });

  test('is false when the deadline comes first; a later rejection of the work is not unhandled', async () => {
    const work = deferred<void>();
    const unhandled = await unhandledRejectionsDuring(async () => {
      assert.equal(await settlesWithin(work.promise, 1), false);
      work.reject(new Error('refused after the deadline'));
    });
    assert.deepEqual(unhandled, []);
  });
});
