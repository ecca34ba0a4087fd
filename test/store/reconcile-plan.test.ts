import assert from 'node:assert/strict';
import { test } from 'node:test';
import postgres from 'postgres';
import { dueClaimSql } from '../../src/store/order-claims.js';
import { openOrdersSql } from '../../src/store/order-queries.js';
import { describeEachBackend } from '../helpers/store-backends.js';

/**
 * A reconciler's reads of its upstream's open orders, each with how many index ranges serve it.
 * Beside another upstream's backlog, PostgreSQL's planner takes an upstream's share of the open
 * orders to be its share of all orders; before schema 32 it walked an index of every upstream's
 * open orders (`orders_next_poll_at`, `orders_open_created`) for an upstream that had none
 * (docs/performance.md, "10 million orders at schema 32"). Schema 32 keeps one index of the open orders, led
 * by the upstream. SQLite's planner goes by the schema alone (h2h-sync never runs ANALYZE on it).
 */
const READS: Array<[string, (skipLocked: string) => string, number]> = [
  ['the due orders it claims', (skipLocked) => dueClaimSql(skipLocked), 1],
  ['its oldest open order and its due count', () => openOrdersSql(true), 1],
];
/** The index of the open orders, led by the upstream (schema 32). */
const UPSTREAM_FIRST = ['orders_open'];
const NOW = 1_000_000;
const PARAMS = { dueBy: NOW, now: NOW, limit: 10, upstream: 'default' };

/**
 * 3,000 settled orders of `default` and, interleaved with them, 3,000 open and due orders of
 * `beta` (a backlog on one upstream), with the planner's statistics: `default` is half of the
 * orders and none of the due ones.
 */
const BACKLOG_SQL = `
  INSERT INTO orders (partner_ref, shop_ref, upstream, submission_state, local_created_at, updated_at, next_poll_at)
  WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000)
  SELECT 'ref-' || i, 'ref-' || i, CASE WHEN i % 2 = 0 THEN 'beta' ELSE 'default' END, 'accepted', i, i,
         CASE WHEN i % 2 = 0 THEN i ELSE NULL END
  FROM n`;

describeEachBackend('a reconciler beside another upstream’s backlog', (backend) => {
  test('reads its own upstream’s open orders from indexes that lead with the upstream: never the other upstream’s due orders, never a sort', async (t) => {
    const { store, url } = await backend.tempStore(t);
    await store.context.db.write((tx) => tx.exec(BACKLOG_SQL));
    // PostgreSQL plans from its statistics (autovacuum keeps them); SQLite from the schema alone,
    // since h2h-sync never runs ANALYZE on it.
    if (backend.name === 'postgres') await store.context.db.exec('ANALYZE');
    const sqlPg = backend.name === 'postgres' ? postgres(url, { max: 1, onnotice: () => {} }) : undefined;
    t.after(() => sqlPg?.end({ timeout: 1 }));
    for (const [what, sqlOf, ranges] of READS) {
      if (!sqlPg) {
        const plan = await store.context.db.all<{ detail: string }>(
          `EXPLAIN QUERY PLAN ${sqlOf('')}`,
          PARAMS,
        );
        const steps = plan.map((step) => step.detail);
        const used = steps.flatMap(
          (s) => /^SEARCH orders USING (?:COVERING )?INDEX (\w+) \(upstream=\?/.exec(s)?.[1] ?? [],
        );
        assert.equal(used.length, ranges, `${what}: ${steps.join('; ')}`);
        assert.ok(!steps.some((s) => /^SCAN orders|TEMP B-TREE/.test(s)), `${what}: ${steps.join('; ')}`);
      } else {
        const text = sqlOf('FOR UPDATE SKIP LOCKED').replace(
          /@(\w+)/gu,
          (_, name: string) => `'${PARAMS[name as keyof typeof PARAMS]}'`,
        );
        const lines = (await sqlPg.unsafe(`EXPLAIN ${text}`))
          .map((row) => String(row['QUERY PLAN']))
          .join('\n');
        assert.doesNotMatch(lines, /Sort|Seq Scan/u, `${what}:\n${lines}`);
        const used = [
          ...lines.matchAll(/(?:Index (?:Only )?Scan(?: Backward)? using|Bitmap Index Scan on) (\w+)/gu),
        ].map((m) => m[1]);
        assert.equal(used.length, ranges, `${what}:\n${lines}`);
        for (const index of used) assert.ok(UPSTREAM_FIRST.includes(index!), `${what}:\n${lines}`);
        assert.match(lines, /Index Cond: \(\(?upstream = 'default'::text\)/u, `${what}:\n${lines}`);
      }
    }
  });

  test('`status` counts every upstream’s due orders and finds the oldest open one; on SQLite from the index of the open orders only', async (t) => {
    const { store } = await backend.tempStore(t);
    await store.context.db.write((tx) => tx.exec(BACKLOG_SQL));
    const counts = await store.queries.countByStatus(NOW);
    assert.equal(counts.dueForPoll, 3000);
    assert.equal(counts.oldestOpenLocalCreatedAt, 2);
    assert.equal((await store.queries.countByStatus(NOW, 'default')).oldestOpenLocalCreatedAt, null);
    // PostgreSQL reads the table here, rightly (half the orders are open; at 0.5 % it reads the
    // index: docs/performance.md); SQLite, without statistics, would read every order.
    if (backend.name === 'sqlite') {
      const plan = await store.context.db.all<{ detail: string }>(
        `EXPLAIN QUERY PLAN ${openOrdersSql(false)}`,
        PARAMS,
      );
      assert.deepEqual(
        plan.map((step) => step.detail),
        ['SCAN orders USING COVERING INDEX orders_open'],
      );
    }
  });
});
