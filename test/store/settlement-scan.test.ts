import assert from 'node:assert/strict';
import { test } from 'node:test';
import postgres from 'postgres';
import { ordersPlaced, settlementPageSql } from '../../src/store/settlement-scan.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const DATA = { user_id: '12345678', server_id: '2001' };

describeEachBackend('the settlement report’s scan of the orders placed in a range', (backend) => {
  test('pages along the placement time: every order of the range once, orders placed in the same millisecond never split between pages; the range’s ends to the millisecond', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const from = clock.now() + 1;
    const to = from + 10;
    // Before the range, 3 in its first ms, one alone, 2 in a later ms (one of them beta's), one at its end (excluded).
    const placedAt: [string, number][] = [
      ['before', from - 1],
      ['s1', from],
      ['s2', from],
      ['s3', from],
      ['m', from + 3],
      ['l1', from + 5],
      ['l2', from + 5],
      ['end', to],
    ];
    for (const [ref, at] of placedAt) {
      clock.advance(at - clock.now());
      const upstream = ref === 'l2' ? 'beta' : 'default';
      await store.writer.createLocalOrder({ partnerRef: ref, productCode: 'ML86', data: DATA, upstream });
    }

    const pages: string[][] = [];
    for await (const page of ordersPlaced(store.context.db, { from, to }, 2)) {
      pages.push(page.map((row) => row.partner_ref).sort());
    }
    // A page of one ms is that ms's every order; a page of several ends before its last ms.
    assert.deepEqual(pages, [['s1', 's2', 's3'], ['m'], ['l1', 'l2']]);

    // With an upstream: that upstream's orders, and those with ended attempts (which may be its).
    const beta: string[] = [];
    for await (const page of ordersPlaced(store.context.db, { from, to, upstream: 'beta' }, 2)) {
      beta.push(...page.map((row) => row.partner_ref));
    }
    assert.deepEqual(beta, ['l2']);
  });

  test('the range is the index orders_local_created_at’s, read in its order: never a scan of the table, never a sort', async (t) => {
    const { store, url } = await backend.tempStore(t);
    const params = { lo: 1, to: 2, limit: 1000, upstream: 'beta' };
    for (const upstream of [false, true]) {
      const sql = settlementPageSql(upstream);
      if (backend.name === 'sqlite') {
        const plan = await store.context.db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${sql}`, params);
        assert.deepEqual(
          plan.map((step) => step.detail),
          ['SEARCH orders USING INDEX orders_local_created_at (local_created_at>? AND local_created_at<?)'],
        );
      } else {
        // An empty table is read whole whatever the indexes: the planner is told not to, so the
        // plan shows whether the range can be an index condition read in the index's order.
        const sqlPg = postgres(url, { max: 1, onnotice: () => {} });
        t.after(() => sqlPg.end({ timeout: 1 }));
        const text = sql.replace(/@(\w+)/gu, (_, name: string) => `'${params[name as keyof typeof params]}'`);
        const plan = await sqlPg.begin(async (tx) => {
          await tx.unsafe('SET LOCAL enable_seqscan = off');
          return tx.unsafe(`EXPLAIN ${text}`);
        });
        const lines = plan.map((row) => String(row['QUERY PLAN']));
        assert.ok(!lines.some((line) => /Sort/u.test(line)), lines.join('\n'));
        assert.ok(
          lines.some((line) => /Index Scan using orders_local_created_at on orders/u.test(line)),
          lines.join('\n'),
        );
        assert.ok(
          lines.some((line) =>
            /Index Cond: \(\(local_created_at >= .*\) AND \(local_created_at < .*\)\)/u.test(line),
          ),
          lines.join('\n'),
        );
      }
    }
  });
});
