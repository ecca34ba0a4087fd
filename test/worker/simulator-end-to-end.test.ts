import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig, receiverSettings } from '../../src/config/config.js';
import { placeOrder } from '../../src/orders/place-order.js';
import { startReceiver } from '../../src/receiver/server.js';
import type { WebhookAttemptRecord } from '../../src/simulator/index.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { startWorkerProcess } from '../../src/worker/server.js';
import { SECRET } from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { openTestStore, scheduleSettings, tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope } from '../helpers/worker.js';

/** Timeline suffixes (docs/simulator.md) and the webhook events each order sends. */
const TIMELINES: [suffix: string, events: number][] = [
  ['0002', 1], // PENDING → FAILED
  ['0003', 2], // PENDING → PROCESSING → SUCCESS with serial
  ['0004', 2], // PENDING → PROCESSING → FAILED
  ['0005', 2], // PENDING → SUCCESS → SUCCESS with serial
  ['0006', 2], // PENDING → SUCCESS with serial → REFUNDED
  ['1234', 1], // PENDING → SUCCESS with serial
];
const ROUNDS = 3;
/** Steps every 0.4 ms; the sender's retries after 12 ms, 60 ms, 0.36 s, 1.44 s, 4.32 s. */
const TIME_SCALE = 0.0002;
const COMPARED = ['status', 'serial_number', 'success_at', 'amount', 'invoice_number', 'message'] as const;

function byEvent(log: readonly WebhookAttemptRecord[]): Map<string, WebhookAttemptRecord[]> {
  const events = new Map<string, WebhookAttemptRecord[]>();
  for (const attempt of log) events.set(attempt.event_id, [...(events.get(attempt.event_id) ?? []), attempt]);
  return events;
}

test('simulator → receiver → Redis → worker → SQLite: with duplicated, reordered, badly signed and stale webhooks, every local order ends equal to the upstream’s', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  const config = loadConfig({
    REDIS_URL: redis.url,
    H2H_API_SECRET: SECRET,
    PORT: '0',
    H2H_RECEIVER_METRICS_PORT: '0',
    H2H_DB_PATH: dbPath,
    // Webhooks only: this test proves the webhook path alone converges.
    RECONCILE_ENABLED: 'false',
  });
  const receiver = await startReceiver(receiverSettings(config));
  t.after(() => receiver.close());
  const worker = await startWorkerProcess(config);
  t.after(() => worker.close());
  const sim = await startSimulator(t, { webhookUrl: receiver.webhookUrl, timeScale: TIME_SCALE });
  await sim.setFaults({
    webhook_duplicate: 0.3,
    webhook_reorder: 0.3,
    webhook_bad_signature: 0.3,
    webhook_stale_timestamp: 0.3,
  });

  // The placing process: its own client and its own connection to the order store.
  const store = await openTestStore(dbPath, scheduleSettings());
  t.after(() => store.close());
  const client = new UpstreamClient({ baseUrl: sim.sim.baseUrl, apiKey: sim.member.api_key });
  t.after(() => client.close());
  const placed = await Promise.all(
    Array.from({ length: ROUNDS }, () => TIMELINES).flatMap((timelines) =>
      timelines.map(([suffix]) =>
        placeOrder(
          { client, store },
          { productCode: 'MLBB-86', data: { user_id: userIdEndingIn(suffix), server_id: '2001' } },
        ),
      ),
    ),
  );
  assert.ok(placed.every((result) => result.outcome === 'accepted'));
  const expectedEvents = ROUNDS * TIMELINES.reduce((sum, [, events]) => sum + events, 0);

  const webhookLog = async () => (await sim.control<WebhookAttemptRecord[]>('/webhooks')).body;
  // The sender gives up on an event after six failed attempts, and a given-up event is a lost
  // webhook: the reconciler's case (issue 5), not this one. So the signature faults are lifted
  // for an event's last attempts only: once every event is delivered or has failed three times.
  await waitFor(
    async () => {
      const events = byEvent(await webhookLog());
      return (
        events.size === expectedEvents &&
        [...events.values()].every((attempts) => attempts.some((a) => a.delivered || a.attempt >= 4))
      );
    },
    { timeoutMs: 20_000, message: `all ${expectedEvents} events delivered or failed three times` },
  );
  await sim.setFaults({ webhook_bad_signature: 0, webhook_stale_timestamp: 0 });
  const log = await waitFor(
    async () => {
      const attempts = await webhookLog();
      return [...byEvent(attempts).values()].every((list) => list.some((a) => a.delivered))
        ? attempts
        : undefined;
    },
    { timeoutMs: 20_000, message: 'every event delivered' },
  );
  for (const fault of ['duplicate', 'reordered', 'bad_signature', 'stale_timestamp']) {
    assert.ok(
      log.some((a) => a.faults.includes(fault)),
      `the ${fault} fault was exercised`,
    );
  }

  const queue = receiver.producer.webhookQueue;
  await waitFor(
    async () => {
      const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed');
      assert.equal(counts.failed, 0, 'no webhook job failed');
      return (
        counts.waiting === 0 &&
        counts.active === 0 &&
        counts.delayed === 0 &&
        counts.completed === expectedEvents
      );
    },
    { timeoutMs: 20_000, message: `the queue drained: ${expectedEvents} jobs completed` },
  );

  const upstream = await sim.allOrders();
  assert.equal(upstream.length, placed.length);
  for (const remote of upstream) {
    const local = await store.queries.getOrder(remote.partner_ref);
    assert.ok(local, `${remote.partner_ref} is known locally`);
    assert.deepEqual(
      {
        status: local.status,
        serial_number: local.serialNumber,
        success_at: local.successAt,
        amount: local.amount,
        invoice_number: local.invoiceNumber,
        message: local.message,
      },
      Object.fromEntries(COMPARED.map((field) => [field, remote[field] ?? null])),
      remote.partner_ref,
    );
    const webhookEvents = (await store.queries.listEvents(remote.partner_ref)).filter(
      (e) => e.source === 'webhook',
    );
    const delivered = new Set(log.filter((a) => a.partner_ref === remote.partner_ref).map((a) => a.event_id));
    assert.deepEqual(
      webhookEvents.map((e) => e.eventId).sort(),
      [...delivered].sort(),
      `${remote.partner_ref}: each delivered event recorded once`,
    );
  }
});
