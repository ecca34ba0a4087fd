import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { createNotifyMetrics, GONE_REASON } from '../../src/notify/notify-metrics.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { registerSubmissionGauges } from '../../src/orders/submission-metrics.js';
import { createReconcilerMetrics } from '../../src/reconciler/metrics.js';
import { storeHealthMetrics } from '../../src/store/store-health.js';
import { scraped } from '../helpers/metrics.js';
import { liveOrder } from '../helpers/notify.js';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

/**
 * The gauges the alerting rules (deploy/prometheus/) read from the order store at each scrape:
 * what a scrape of each says about a store in a known state.
 */

const MINUTE = 60_000;

describeEachBackend('gauges the alerts read from the store', (backend) => {
  test('h2h_store_up is 1 while the store answers a read and 0 once it cannot', async (t) => {
    const { url } = await backend.tempStore(t);
    const other = await backend.open(t, url);
    const registry = storeHealthMetrics(other.context.db);
    assert.equal(await scraped(registry, 'h2h_store_up'), 1);
    await other.close();
    assert.equal(await scraped(registry, 'h2h_store_up'), 0);
  });

  test('the submission gauges count each upstream’s queued orders and the oldest one’s age; sent orders leave them', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const registry = new Registry();
    registerSubmissionGauges(registry, store.queries, ['default', 'beta'], clock.now);
    const queue = (ref: string) =>
      store.writer.createLocalOrder({
        partnerRef: ref,
        productCode: 'ML86',
        data: { user_id: '12345678', server_id: '2001' },
        queued: true,
      });
    await queue('Q-1');
    clock.advance(MINUTE);
    await queue('Q-2');
    // A placed order (not queued) is no backlog.
    await liveOrder(store, 'SENT');
    clock.advance(90_000);
    assert.equal(await scraped(registry, 'h2h_submission_queued_orders', { upstream: 'default' }), 2);
    assert.equal(
      await scraped(registry, 'h2h_submission_oldest_queued_age_seconds', { upstream: 'default' }),
      150,
    );
    assert.equal(await scraped(registry, 'h2h_submission_queued_orders', { upstream: 'beta' }), 0);
    assert.equal(
      await scraped(registry, 'h2h_submission_oldest_queued_age_seconds', { upstream: 'beta' }),
      0,
    );
  });

  test('h2h_reconcile_overdue_orders counts the open orders older than their product’s learned outlier time, and only those', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const plan = { finalMs: 60_000, deliveryMs: 1_000, minMs: 5_000, maxMs: 900_000, samples: 200 };
    await store.pollPlans.replace(
      'default',
      new Map([
        ['ML86', { ...plan, outlierMs: 10 * MINUTE }],
        // A product learned only with every other product: no outlier time of its own.
        ['*', { ...plan, outlierMs: null }],
      ]),
    );
    const at = new Date(clock.now()).toISOString();
    const place = (ref: string, status: string, product = 'ML86') =>
      store.writer.applyOrderSnapshot(snapshot(ref, status, { product_code: product, created_at: at }), {
        source: 'create',
      });
    await place('SLOW', 'PROCESSING');
    await place('DONE', 'SUCCESS');
    await place('OTHER', 'PROCESSING', 'FF100');
    clock.advance(5 * MINUTE);
    await place('YOUNG', 'PENDING');
    const metrics = createReconcilerMetrics({ queries: store.queries, circuit: store.circuit });
    assert.equal(await scraped(metrics.registry, 'h2h_reconcile_overdue_orders', { upstream: 'default' }), 0);
    clock.advance(6 * MINUTE);
    // SLOW is 11 minutes old, YOUNG 6; DONE is final; OTHER's product has no outlier time.
    assert.equal(await scraped(metrics.registry, 'h2h_reconcile_overdue_orders', { upstream: 'default' }), 1);
    clock.advance(5 * MINUTE);
    assert.equal(await scraped(metrics.registry, 'h2h_reconcile_overdue_orders', { upstream: 'default' }), 2);
  });

  test('the endpoint gauges show each endpoint’s pending notifications, the oldest one’s age and why it is disabled', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const add = (url: string) =>
      store.endpoints.add({ url, events: ['order.*'], secret: generateEndpointSecret() });
    const live = await add('http://127.0.0.1:9/live');
    const gone = await add('http://127.0.0.1:9/gone');
    const stopped = await add('http://127.0.0.1:9/stopped');
    await store.endpoints.disable(gone.id, GONE_REASON);
    await store.endpoints.disable(stopped.id, 'disabled with h2h-sync endpoints disable');
    await liveOrder(store, 'N-1');
    clock.advance(2 * MINUTE);
    const metrics = createNotifyMetrics(undefined, {
      endpoints: store.endpoints,
      outbox: store.outbox,
      now: clock.now,
    });
    const value = (name: string, endpoint: number, more: Record<string, string> = {}) =>
      scraped(metrics.registry, name, { endpoint: String(endpoint), ...more });

    const events = (await store.feed.after(0, 100)).length;
    assert.ok(events > 0);
    assert.equal(await value('h2h_notify_pending', live.id), events);
    assert.equal(await value('h2h_notify_oldest_pending_age_seconds', live.id), 120);
    assert.equal(await value('h2h_notify_retrying', live.id), 0);
    assert.equal(await value('h2h_notify_endpoint_disabled', live.id, { reason: 'gone' }), 0);
    assert.equal(await value('h2h_notify_endpoint_disabled', live.id, { reason: 'operator' }), 0);
    assert.equal(await value('h2h_notify_endpoint_disabled', gone.id, { reason: 'gone' }), 1);
    assert.equal(await value('h2h_notify_endpoint_disabled', gone.id, { reason: 'operator' }), 0);
    assert.equal(await value('h2h_notify_endpoint_disabled', stopped.id, { reason: 'operator' }), 1);
    assert.equal(await value('h2h_notify_endpoint_disabled', stopped.id, { reason: 'gone' }), 0);
    // A disabled endpoint's pending are the events it is not sent, as in `status`.
    assert.equal(await value('h2h_notify_pending', gone.id), events);

    await store.endpoints.enable(gone.id);
    assert.equal(await value('h2h_notify_endpoint_disabled', gone.id, { reason: 'gone' }), 0);
  });
});
