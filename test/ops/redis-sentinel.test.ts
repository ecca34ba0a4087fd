// Redis behind Sentinel (docs/deployment.md, "Redis with Sentinel"): a primary, a replica and
// three sentinels on free ports; the real receiver (HTTP on 127.0.0.1) and the real event worker
// (SQLite store) find the primary through the sentinels. Webhooks stream in, the primary is killed
// with SIGKILL mid-stream, the sentinels promote the replica, and both go on, without a restart,
// with the promoted one: every webhook answered 2xx, before or after, is applied.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { loadConfig, receiverSettings } from '../../src/config/config.js';
import { startSentinelGroup } from '../../src/dev/redis-sentinel.js';
import { startRedisServer } from '../../src/dev/redis-server.js';
import { startReceiver } from '../../src/receiver/server.js';
import { deliveryHeaders, SECRET } from '../helpers/receiver.js';
import { otherConnection, snapshot, tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope, startTestWorker, webhookBodyOf } from '../helpers/worker.js';

/** Webhooks answered 2xx before the kill. */
const BEFORE = 150;
/** Webhooks answered 2xx after the failover, before the stream stops. */
const AFTER = 150;
/** Senders posting at once, each one webhook after another, as the upstream's delivery workers do. */
const SENDERS = 4;

test('the primary killed mid-stream: receiver and worker go on with the promoted replica, and every webhook answered 2xx is applied', {
  timeout: 120_000,
}, async (test) => {
  const t = cleanupScope(test);
  const group = await startSentinelGroup();
  t.after(() => group.stop());
  const config = loadConfig({
    REDIS_URL: 'redis://127.0.0.1',
    H2H_REDIS_SENTINELS: group.sentinels.join(','),
    H2H_REDIS_SENTINEL_MASTER: group.masterName,
    H2H_RECEIVER_REPLICA_ACKS: '1',
    H2H_API_SECRET: SECRET,
    PORT: '0',
    H2H_RECEIVER_METRICS_PORT: '0',
  });
  const dbPath = tempDbPath(t);
  const { eventWorker } = await startTestWorker(t, { redisUrl: config.redisUrl, dbPath });
  const receiver = await startReceiver(receiverSettings(config));
  t.after(() => receiver.close());
  const reader = await otherConnection(dbPath);
  t.after(() => reader.close());

  const accepted: string[] = [];
  let refused = 0;
  let stopping = false;
  let sent = 0;
  const send = async (): Promise<void> => {
    while (!stopping) {
      const n = sent++;
      const eventId = `evt_failover_${n}`;
      const body = webhookBodyOf(snapshot(`failover-${n}`, 'SUCCESS', { serial_number: `SN-${n}` }), eventId);
      const answer = await request(receiver.webhookUrl, {
        method: 'POST',
        headers: deliveryHeaders(body, { eventId }),
        body,
      });
      await answer.body.dump();
      if (answer.statusCode === 200) accepted.push(eventId);
      else {
        assert.equal(answer.statusCode, 503, 'a webhook not taken is the documented, retryable 503');
        refused += 1;
      }
    }
  };
  const senders = Array.from({ length: SENDERS }, send);

  await waitFor(() => accepted.length >= BEFORE, {
    timeoutMs: 30_000,
    message: `${BEFORE} webhooks answered 200`,
  });
  const acceptedAtKill = accepted.length;
  await group.primary.kill();
  await waitFor(async () => (await group.primaryPort()) === group.replica.port, {
    timeoutMs: 30_000,
    message: 'the sentinels to promote the replica',
  });
  // The promoted replica has no replica of its own: with H2H_RECEIVER_REPLICA_ACKS=1 the receiver
  // answers 503 until one is back, as an operator brings one (or the old primary) back.
  const newReplica = await startRedisServer({
    appendOnly: false,
    args: ['--replicaof', '127.0.0.1', String(group.replica.port)],
  });
  t.after(() => newReplica.stop());
  const afterFailover = accepted.length;
  await waitFor(() => accepted.length >= afterFailover + AFTER, {
    timeoutMs: 30_000,
    message: `${AFTER} webhooks answered 200 after the failover`,
  });
  stopping = true;
  await Promise.all(senders);

  const applied = () =>
    new Set(
      (reader.prepare('SELECT event_id FROM order_events').all() as { event_id: string }[]).map(
        (row) => row.event_id,
      ),
    );
  await waitFor(() => accepted.every((eventId) => applied().has(eventId)), {
    timeoutMs: 30_000,
    message: `all ${accepted.length} webhooks answered 200 applied`,
  });
  assert.ok(eventWorker.worker.isRunning(), 'the same worker, never restarted, applied them');
  assert.ok(
    refused > 0,
    'webhooks sent while no primary (or no replica) could take them were refused, not lost',
  );
  test.diagnostic(
    `${accepted.length} webhooks answered 200 (${acceptedAtKill} before the kill), ${refused} answered 503 during the failover`,
  );
});
