import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig, receiverSettings } from '../../src/config/config.js';
import { parseWebhookBody } from '../../src/queue/webhook-order.js';
import { decodeWebhookRawBody } from '../../src/queue/webhook-queue.js';
import { startReceiver } from '../../src/receiver/server.js';
import type { WebhookAttemptRecord } from '../../src/simulator/index.js';
import { SECRET } from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';

/** Timeline suffixes (docs/simulator.md) and how many events each order sends. */
const TIMELINES: [suffix: string, events: number][] = [
  ['0003', 2], // PENDING → PROCESSING → SUCCESS
  ['0004', 2], // PENDING → PROCESSING → FAILED
  ['0005', 2], // PENDING → SUCCESS → SUCCESS with serial
  ['0006', 2], // PENDING → SUCCESS → REFUNDED
  ['0002', 1], // PENDING → FAILED
  ['1234', 1], // PENDING → SUCCESS
];
const MAX_ATTEMPTS = 6;

/** `Map.groupBy`, which Node 20 lacks. */
function groupBy<T, K>(items: readonly T[], key: (item: T) => K): Map<K, T[]> {
  const groups = new Map<K, T[]>();
  for (const item of items) {
    const k = key(item);
    groups.set(k, [...(groups.get(k) ?? []), item]);
  }
  return groups;
}

test('the simulator’s webhooks, duplicated and some badly signed, end as exactly one job per delivered event', async (t) => {
  const redis = await privateRedis(t);
  const receiver = await startReceiver(
    receiverSettings(
      loadConfig({ REDIS_URL: redis.url, H2H_API_SECRET: SECRET, PORT: '0', H2H_RECEIVER_METRICS_PORT: '0' }),
    ),
  );
  t.after(() => receiver.close());
  const sim = await startSimulator(t, { webhookUrl: receiver.webhookUrl, timeScale: 0.001 });
  const faults = await sim.control('/faults', {
    method: 'POST',
    json: { webhook_duplicate: 0.35, webhook_bad_signature: 0.35 },
  });
  assert.equal(faults.status, 200);

  let expectedEvents = 0;
  for (const [suffix, events] of [...TIMELINES, ...TIMELINES]) {
    const created = await sim.createOrder({ data: { user_id: userIdEndingIn(suffix), server_id: '2001' } });
    assert.equal(created.status, 201);
    expectedEvents += events;
  }

  // Settled: every event was delivered, or the simulator gave up after its last attempt.
  const attempts = await waitFor(
    async () => {
      const log = (await sim.control<WebhookAttemptRecord[]>('/webhooks')).body;
      const byEvent = groupBy(log, (a) => a.event_id);
      const settled =
        byEvent.size === expectedEvents &&
        [...byEvent.values()].every(
          (list) => list.some((a) => a.delivered) || list.some((a) => a.attempt === MAX_ATTEMPTS),
        );
      return settled ? log : undefined;
    },
    { timeoutMs: 60_000, message: `all ${expectedEvents} events delivered or given up` },
  );

  const badlySigned = attempts.filter((a) => a.faults.includes('bad_signature'));
  assert.ok(badlySigned.length > 0, 'the bad-signature fault was exercised');
  assert.ok(
    attempts.some((a) => a.faults.includes('duplicate') && a.delivered),
    'the duplicate fault was exercised',
  );
  for (const attempt of badlySigned) {
    assert.equal(attempt.answer_status, 401, `bad signature answered ${attempt.answer_status}`);
    assert.equal(attempt.delivered, false);
  }

  const delivered = new Set(attempts.filter((a) => a.delivered).map((a) => a.event_id));
  const jobs = await receiver.producer.webhookQueue.getJobs(['waiting'], 0, -1);
  const jobsPerEvent = groupBy(jobs, (job) => job.data.eventId);
  assert.deepEqual(new Set(jobsPerEvent.keys()), delivered, 'a job for every delivered event, and no other');
  for (const [eventId, list] of jobsPerEvent) {
    assert.equal(list.length, 1, `${eventId} queued once`);
    const parsed = parseWebhookBody(decodeWebhookRawBody(list[0]!.data));
    assert.ok(parsed.ok && (parsed.body as { event_id: string }).event_id === eventId);
  }
});
