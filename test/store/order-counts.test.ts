// `status` and the reconcile pass count orders from order_counts (schema 27), kept by triggers
// on orders: the counts must stay those of the orders themselves through every kind of write.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openStore } from '../../src/store/open-store.js';
import type { OrderCounts } from '../../src/store/order-queries.js';
import type { SqlExecutor } from '../../src/store/sql/executor.js';
import { rewindToSchema26, snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const DATA = { user_id: '12345678', server_id: '2001' };

/** The counts of `countByStatus` worked out from every order row, as schema 26 counted them. */
async function countedFromOrders(db: SqlExecutor, now: number, upstream?: string): Promise<OrderCounts> {
  const where = upstream === undefined ? 'WHERE TRUE' : 'WHERE upstream = @upstream';
  const params = upstream === undefined ? { now } : { now, upstream };
  const orders = await db.all<{
    key: string | null;
    submission_state: keyof OrderCounts['bySubmissionState'];
    next_poll_at: number | null;
    local_created_at: number;
    stuck: number;
  }>(
    `SELECT COALESCE(status, upstream_status) AS key, submission_state, next_poll_at, local_created_at,
            CASE WHEN stuck_at IS NOT NULL AND (next_poll_at IS NOT NULL
              OR (status = 'SUCCESS' AND serial_number IS NULL)) THEN 1 ELSE 0 END AS stuck
     FROM orders ${where}`,
    params,
  );
  const byStatus: Record<string, number> = {};
  for (const key of orders
    .map((o) => o.key)
    .filter((k): k is string => k !== null)
    .sort()) {
    byStatus[key] = (byStatus[key] ?? 0) + 1;
  }
  const bySubmissionState = {
    queued: 0,
    pending: 0,
    accepted: 0,
    rejected: 0,
    unknown: 0,
    blocked: 0,
    cancelled: 0,
  };
  for (const o of orders) bySubmissionState[o.submission_state] += 1;
  const open = orders.filter((o) => o.next_poll_at !== null);
  return {
    total: orders.length,
    byStatus,
    bySubmissionState,
    open: open.length,
    oldestOpenLocalCreatedAt: open.length ? Math.min(...open.map((o) => Number(o.local_created_at))) : null,
    dueForPoll: open.filter((o) => Number(o.next_poll_at) <= now).length,
    stuck: orders.filter((o) => Number(o.stuck) === 1).length,
  };
}

describeEachBackend('order counts', (backend) => {
  test('the counts stay those of the orders through inserts, changes, polls, stuck marks and deletes', async (t) => {
    const { store, clock } = await backend.tempStore(t, {
      firstPollDelayMs: 1_000,
      backoffMs: [60_000],
      stuckAfterMs: 1,
    });
    const check = async (step: string) => {
      const now = clock.now() + 1_000;
      assert.deepEqual(await store.queries.countByStatus(now), await countedFromOrders(store.db, now), step);
      for (const upstream of ['default', 'beta']) {
        assert.deepEqual(
          await store.queries.countByStatus(now, upstream),
          await countedFromOrders(store.db, now, upstream),
          `${step}, upstream ${upstream}`,
        );
      }
    };
    await check('empty');
    await store.writer.applyOrderSnapshot(snapshot('A', 'PENDING'), { source: 'poll' });
    await store.writer.applyOrderSnapshot(snapshot('B', 'PROCESSING'), {
      source: 'create',
      upstream: 'beta',
    });
    await store.writer.createLocalOrder({ partnerRef: 'C', data: DATA });
    await store.writer.createLocalOrder({ partnerRef: 'D', data: DATA });
    await check('new orders');
    await store.writer.applyOrderSnapshot(snapshot('A', 'SUCCESS', { serial_number: 'SN' }), {
      source: 'webhook',
      eventId: 'e1',
    });
    await store.writer.applyOrderSnapshot(snapshot('B', 'ON_HOLD'), { source: 'poll', upstream: 'beta' });
    await store.writer.markRejected('D', 'INVALID_TARGET', 'user_id');
    await check('changed orders');
    clock.advance(2_000);
    await store.writer.applyOrderSnapshot(snapshot('E', 'PENDING'), { source: 'poll' });
    await store.claims.recordPoll('E'); // open past stuckAfterMs: marked stuck
    await store.claims.recordPoll('C');
    await check('polled and stuck');
    await store.writer.applyOrderSnapshot(snapshot('E', 'SUCCESS'), { source: 'poll' }); // stuck, no serial
    await check('a stuck SUCCESS without its serial');
    await store.db.write((tx) => tx.run("DELETE FROM orders WHERE partner_ref IN ('A', 'D')", {}));
    await check('deleted orders');
    const counts = await store.queries.countByStatus(clock.now());
    assert.equal(counts.total, 3);
    assert.equal(counts.stuck, 1);
  });

  test('an upgrade to schema 27 counts the orders already there', async (t) => {
    const { store, url, clock } = await backend.tempStore(t);
    await store.writer.applyOrderSnapshot(snapshot('A', 'PENDING'), { source: 'poll' });
    await store.writer.applyOrderSnapshot(snapshot('B', 'SUCCESS', { serial_number: 'SN' }), {
      source: 'poll',
    });
    await store.writer.createLocalOrder({ partnerRef: 'C', data: DATA });
    await store.writer.applyOrderSnapshot(snapshot('D', 'FAILED'), { source: 'poll' });
    // Rewound last: after it this connection's cached statements no longer match the table.
    await store.db.write((tx) => rewindToSchema26(tx));
    await store.close();

    const upgraded = await openStore(url, { role: 'test', now: clock.now });
    t.after(() => upgraded.close());
    const now = clock.now();
    const counts = await upgraded.queries.countByStatus(now);
    assert.deepEqual(counts, await countedFromOrders(upgraded.db, now));
    assert.equal(counts.total, 4);
    await upgraded.writer.applyOrderSnapshot(snapshot('A', 'SUCCESS', { serial_number: 'S2' }), {
      source: 'poll',
    });
    assert.deepEqual(await upgraded.queries.countByStatus(now), await countedFromOrders(upgraded.db, now));
  });
});
