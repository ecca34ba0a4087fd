import assert from 'node:assert/strict';
import { test } from 'node:test';
import postgres from 'postgres';
import { dueClaimSql } from '../../src/store/order-claims.js';
import { openOrdersSql } from '../../src/store/order-queries.js';
import { describeEachBackend } from '../helpers/store-backends.js';

/** A reconciler's reads of its upstream's open orders, each with the indexes that must serve it. */
const READS: Array<[string, (skipLocked: string) => string, string[]]> = [
  ['the due orders it claims', (skipLocked) => dueClaimSql(skipLocked), ['orders_upstream_due']],
  [
    'its oldest open order and its due count',
    () => openOrdersSql(true),
    ['orders_open_by_upstream', 'orders_upstream_due'],
  ],
];
/** The indexes of the open orders that lead with the upstream (schema 31). */
const UPSTREAM_FIRST = ['orders_upstream_due', 'orders_open_by_upstream'];
const PARAMS = { dueBy: 2, now: 2, limit: 10, upstream: 'default' };

describeEachBackend('a reconciler on a store of several upstreams', (backend) => {
  test('reads its own upstream’s open orders from indexes that lead with the upstream: never the open orders of the others, never a sort', async (t) => {
    const { store, url } = await backend.tempStore(t);
    const sqlPg = backend.name === 'postgres' ? postgres(url, { max: 1, onnotice: () => {} }) : undefined;
    t.after(() => sqlPg?.end({ timeout: 1 }));
    for (const [what, sqlOf, indexes] of READS) {
      if (!sqlPg) {
        const sql = sqlOf('');
        const plan = await store.context.db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${sql}`, PARAMS);
        const steps = plan.map((step) => step.detail).filter((s) => /^(SEARCH|SCAN) orders/.test(s));
        assert.deepEqual(
          steps.map((s) => /USING (?:COVERING )?INDEX (\w+) \(upstream=\?/.exec(s)?.[1] ?? s),
          indexes,
          `${what}: ${plan.map((step) => step.detail).join('; ')}`,
        );
        assert.ok(!plan.some((step) => /TEMP B-TREE/.test(step.detail)), what);
      } else {
        // An empty table is read whole whatever the indexes: the planner is told not to, so the
        // plan shows which index ranges can serve the read.
        const sql = sqlOf('FOR UPDATE SKIP LOCKED');
        const text = sql.replace(/@(\w+)/gu, (_, name: string) => `'${PARAMS[name as keyof typeof PARAMS]}'`);
        const plan = await sqlPg.begin(async (tx) => {
          await tx.unsafe('SET LOCAL enable_seqscan = off');
          return tx.unsafe(`EXPLAIN ${text}`);
        });
        const lines = plan.map((row) => String(row['QUERY PLAN'])).join('\n');
        assert.doesNotMatch(lines, /Sort/u, `${what}:\n${lines}`);
        // Either index leads with the upstream: PostgreSQL picks by its statistics (on an empty
        // table it counts the due orders from orders_open_by_upstream, with a real one from
        // orders_upstream_due); each reads this upstream's open orders only.
        const used = [...lines.matchAll(/Index (?:Only )?Scan(?: Backward)? using (\w+) on orders/gu)].map(
          (m) => m[1],
        );
        assert.equal(used.length, indexes.length, `${what}:\n${lines}`);
        for (const index of used) assert.ok(UPSTREAM_FIRST.includes(index!), `${what}:\n${lines}`);
        assert.equal(
          lines.match(/Index Cond: \(+upstream = 'default'::text\)/gu)?.length,
          used.length,
          `${what}:\n${lines}`,
        );
      }
    }
  });
});
