import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig, receiverSettings } from '../../src/config/config.js';
import { placeOrder } from '../../src/orders/place-order.js';
import { startReceiver } from '../../src/receiver/server.js';
import { createEventWorker } from '../../src/worker/event-worker.js';
import {
  differencesFromSimulator,
  metricValue,
  reconcilerEnv,
  startTestReconciler,
  targetFor,
} from '../helpers/reconciler.js';
import { everyOrder } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';

test('with 30% of webhooks lost, duplicated and reordered, webhooks through the receiver and worker plus polling leave every local order equal to the upstream', async (t) => {
  const env = await reconcilerEnv(t, {
    sim: { timeScale: 0.01, seed: 7 },
    // Webhooks usually come first; a poll only when one is overdue. The audit re-reads a settled
    // SUCCESS after 300 ms, or a lost REFUNDED webhook after a delivered SUCCESS would never be seen.
    settings: { firstPollDelayMs: 400, backoffMs: [200, 400, 800], auditEveryMs: 300 },
  });
  const receiver = await startReceiver(
    receiverSettings(
      loadConfig({
        H2H_API_SECRET: env.sim.member.api_secret,
        PORT: '0',
        H2H_RECEIVER_METRICS_PORT: '0',
        REDIS_URL: env.redis.url,
      }),
    ),
  );
  env.defer(() => receiver.close());
  const worker = createEventWorker({ writer: env.store.writer, redisUrl: env.redis.url });
  env.defer(() => worker.close());
  await worker.waitUntilReady();
  await startTestReconciler(env);
  await env.sim.patchMember('M-0001', { webhook_url: receiver.webhookUrl });
  await env.sim.setFaults({ webhook_drop: 0.3, webhook_duplicate: 0.3, webhook_reorder: 0.3 });

  const suffixes = ['0001', '0002', '0003', '0004', '0005', '0006'];
  const refs: string[] = [];
  for (let i = 0; i < 30; i++) {
    const suffix = i < 24 ? suffixes[i % suffixes.length]! : '0007';
    const placed = await placeOrder(
      { client: env.client, store: env.store },
      {
        productCode: 'MLBB-86',
        data: targetFor(suffix),
        partnerRef: `e2e-${String(i).padStart(2, '0')}-${suffix}`,
      },
    );
    assert.equal(placed.outcome, 'accepted');
    refs.push(placed.order.partnerRef);
  }
  // The six that wait for the control API: three succeed, three fail.
  for (const [i, ref] of refs.slice(24).entries()) {
    const change = i < 3 ? { status: 'SUCCESS', serial_number: `SN-E2E-${i}` } : { status: 'FAILED' };
    assert.equal((await env.sim.setStatus(ref, change)).status, 200);
  }

  await waitFor(
    async () =>
      (await differencesFromSimulator(env.store, env.sim, refs)).length === 0 &&
      (await everyOrder(env.store, refs, (order) => order.nextPollAt === null)),
    { timeoutMs: 10_000, message: 'every local order equal to GET /__sim/orders and settled' },
  );

  const attempts = (await env.sim.control('/webhooks')).body as Array<{
    delivered: boolean;
    error: string | null;
  }>;
  assert.ok(
    attempts.some((a) => a.error === 'dropped'),
    'some webhooks were lost',
  );
  const changedBy = new Set<string>();
  for (const ref of refs) {
    for (const e of await env.store.queries.listEvents(ref)) if (e.changed) changedBy.add(e.source);
  }
  assert.ok(changedBy.has('webhook'), 'webhooks moved orders');
  assert.ok(changedBy.has('poll'), 'and polls made up for the lost ones');
  assert.ok((await metricValue(env.metrics, 'h2h_reconcile_orders_changed_total')) > 0);
});
