import assert from 'node:assert/strict';
import { test } from 'node:test';
import postgres from 'postgres';
import { type OrderPageInput, orderPageQuery } from '../../src/store/order-queries.js';
import { describeEachBackend } from '../helpers/store-backends.js';

/** GET /v1/orders' filters, each with the index that must serve it newest first. */
const FILTERS: Array<[string, OrderPageInput, string]> = [
  ['a status', { status: 'FAILED', limit: 50, beforeId: 1000 }, 'orders_status'],
  ['a submission state', { status: 'cancelled', limit: 50, beforeId: 1000 }, 'orders_submission_state'],
  ['an upstream status string', { status: 'REVERSED', limit: 50 }, 'orders_upstream_status'],
  ['upstream_status', { upstreamStatus: 'REVERSED', limit: 50, beforeId: 1000 }, 'orders_upstream_status'],
];

describeEachBackend('GET /v1/orders on a store of years', (backend) => {
  test('a filter that matches few orders reads them from its index, newest first: never every order between them, never a sort', async (t) => {
    const { store, url } = await backend.tempStore(t);
    const sqlPg = backend.name === 'postgres' ? postgres(url, { max: 1, onnotice: () => {} }) : undefined;
    t.after(() => sqlPg?.end({ timeout: 1 }));
    for (const [what, input, index] of FILTERS) {
      const { sql, params } = orderPageQuery(input);
      if (!sqlPg) {
        const plan = await store.context.db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${sql}`, params);
        const steps = plan.map((step) => step.detail);
        assert.equal(steps.length, 1, `${what}: ${steps.join('; ')}`);
        assert.match(steps[0]!, new RegExp(`^SEARCH orders USING INDEX ${index} \\(`), what);
      } else {
        // An empty table is read whole whatever the indexes: the planner is told not to, so the
        // plan shows whether the filter can be an index condition read in the id's order.
        const text = sql.replace(/@(\w+)/gu, (_, name: string) => `'${params[name]}'`);
        const plan = await sqlPg.begin(async (tx) => {
          await tx.unsafe('SET LOCAL enable_seqscan = off');
          return tx.unsafe(`EXPLAIN ${text}`);
        });
        const lines = plan.map((row) => String(row['QUERY PLAN'])).join('\n');
        assert.doesNotMatch(lines, /Sort/u, `${what}:\n${lines}`);
        assert.match(lines, new RegExp(`Index Scan Backward using ${index} on orders`), `${what}:\n${lines}`);
      }
    }
  });
});
