import assert from 'node:assert/strict';
import { test } from 'node:test';
import postgres from 'postgres';
import { dueClaimSql } from '../../src/store/order-claims.js';
import { openOrdersSql } from '../../src/store/order-queries.js';
import { POSTGRES_DIALECT } from '../../src/store/postgres/postgres-db.js';
import { describeEachBackend } from '../helpers/store-backends.js';

/**
 * SQLite reads both from `orders_upstream_due` (schema 23; its planner goes by the schema, never
 * by statistics here); PostgreSQL's claim needs schema 31's form of it and the claim's setting.
 *
 * A reconciler's reads of its upstream's open orders, each with how many index ranges serve it,
 * and whether PostgreSQL's planner reads it so: it still walks every upstream's open orders for
 * the oldest open one and the due count of an upstream that has none, since it takes that
 * upstream's share of the open orders to be its share of all (docs/performance.md, "Volume").
 */
const READS: Array<[string, (skipLocked: string) => string, number, { postgres: boolean }]> = [
  ['the due orders it claims', (skipLocked) => dueClaimSql(skipLocked), 1, { postgres: true }],
  ['its oldest open order and its due count', () => openOrdersSql(true), 2, { postgres: false }],
];
/** The indexes of the open orders that lead with the upstream (schema 31). */
const UPSTREAM_FIRST = ['orders_upstream_due'];
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
    for (const [what, sqlOf, ranges, holds] of READS) {
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
      } else if (holds.postgres) {
        const text = sqlOf('FOR UPDATE SKIP LOCKED').replace(
          /@(\w+)/gu,
          (_, name: string) => `'${PARAMS[name as keyof typeof PARAMS]}'`,
        );
        const plan = await sqlPg.begin(async (tx) => {
          await tx.unsafe(POSTGRES_DIALECT.dueClaimSetupSql);
          return tx.unsafe(`EXPLAIN ${text}`);
        });
        const lines = plan.map((row) => String(row['QUERY PLAN'])).join('\n');
        assert.doesNotMatch(lines, /Sort|Seq Scan/u, `${what}:\n${lines}`);
        const used = [...lines.matchAll(/Index (?:Only )?Scan(?: Backward)? using (\w+) on orders/gu)].map(
          (m) => m[1],
        );
        assert.equal(used.length, ranges, `${what}:\n${lines}`);
        for (const index of used) assert.ok(UPSTREAM_FIRST.includes(index!), `${what}:\n${lines}`);
      }
    }
  });
});
