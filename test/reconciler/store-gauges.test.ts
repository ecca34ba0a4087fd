import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createReconcilerMetrics } from '../../src/reconciler/metrics.js';
import { metricValue } from '../helpers/reconciler.js';
import { tempStore } from '../helpers/store.js';

test('a scrape shows each upstream’s stuck and blocked orders from one count of the store per upstream', async (t) => {
  const { store, db } = await tempStore(t);
  db.exec(`
    INSERT INTO orders (partner_ref, shop_ref, upstream, submission_state, local_created_at, updated_at, next_poll_at, stuck_at)
    VALUES ('stuck-1', 'stuck-1', 'default', 'accepted', 1, 1, 5, 3),
           ('open-1', 'open-1', 'default', 'accepted', 2, 2, 5, NULL),
           ('other-1', 'other-1', 'beta', 'accepted', 2, 2, 5, 3);
    INSERT INTO orders (partner_ref, shop_ref, upstream, submission_state, local_created_at, updated_at, blocked_code)
    VALUES ('blocked-1', 'blocked-1', 'default', 'blocked', 3, 3, 'INVALID_API_KEY'),
           ('blocked-2', 'blocked-2', 'default', 'blocked', 4, 4, 'INVALID_API_KEY');
  `);
  const { queries } = store;
  const countsOnly = queries.countsOnly.bind(queries);
  let reads = 0;
  queries.countsOnly = (...args) => {
    reads++;
    return countsOnly(...args);
  };
  // Two upstreams' reconcilers in one process share a registry.
  const metrics = createReconcilerMetrics({ queries, upstream: 'default' });
  createReconcilerMetrics({ queries, upstream: 'beta', registry: metrics.registry });
  await metrics.registry.metrics();
  assert.equal(reads, 2);
  const figure = (name: string, upstream: string) => metricValue(metrics, name, { upstream });
  assert.equal(await figure('h2h_reconcile_stuck_orders', 'default'), 1);
  assert.equal(await figure('h2h_reconcile_blocked_orders', 'default'), 2);
  assert.equal(await figure('h2h_reconcile_stuck_orders', 'beta'), 1);
  assert.equal(await figure('h2h_reconcile_blocked_orders', 'beta'), 0);
});
