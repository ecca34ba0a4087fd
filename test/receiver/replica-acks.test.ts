import assert from 'node:assert/strict';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { type TestContext, test } from 'node:test';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { loadConfig, receiverSettings } from '../../src/config/config.js';
import { type RedisServer, startRedisServer } from '../../src/dev/redis-server.js';
import { createWebhookProducer, QueueUnavailableError } from '../../src/queue/webhook-producer.js';
import { WEBHOOK_QUEUE, webhookIdentity } from '../../src/queue/webhook-queue.js';
import { startReceiver } from '../../src/receiver/server.js';
import { deliveryHeaders, SECRET, webhookBody } from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A replica of `primary`, in sync when this resolves; stopped when the test ends. Without AOF:
 * redis-server ignores a SIGTERM while it writes the first AOF after a sync ("Writing initial
 * AOF, can't exit"), which would leave `pause()` waiting.
 */
async function syncedReplica(t: Pick<TestContext, 'after'>, primary: RedisServer) {
  const replica = await startRedisServer({
    appendOnly: false,
    args: ['--replicaof', '127.0.0.1', String(primary.port)],
  });
  t.after(() => replica.stop());
  const client = new Redis(replica.url, { lazyConnect: true, retryStrategy: () => 100 });
  client.on('error', () => {});
  t.after(() => client.disconnect());
  const synced = () =>
    waitFor(async () => /master_link_status:up/.test(await client.info('replication').catch(() => '')), {
      message: 'the replica in sync',
    });
  await synced();
  return { replica, client, synced };
}

async function receiverOn(t: Pick<TestContext, 'after'>, redisUrl: string, replicaAcks: number) {
  const receiver = await startReceiver(
    receiverSettings(
      loadConfig({
        REDIS_URL: redisUrl,
        H2H_RECEIVER_REPLICA_ACKS: String(replicaAcks),
        H2H_RECEIVER_REPLICA_ACK_TIMEOUT_MS: '200',
        H2H_API_SECRET: SECRET,
        PORT: '0',
        H2H_RECEIVER_METRICS_PORT: '0',
      }),
    ),
  );
  t.after(() => receiver.close());
  const answered = async (answer: Awaited<ReturnType<typeof request>>) => ({
    status: answer.statusCode,
    json: (await answer.body.json()) as Record<string, unknown>,
  });
  return {
    post: async (body: string) =>
      answered(await request(receiver.webhookUrl, { method: 'POST', headers: deliveryHeaders(body), body })),
    readyz: async () => answered(await request(`${receiver.origin}/readyz`)),
  };
}

test('with H2H_RECEIVER_REPLICA_ACKS=1 a webhook is answered 200 only once a replica holds it: 503 while none acknowledges, 200 to the retry once one is back', async (t) => {
  const primary = await privateRedis(t);
  const { replica, client, synced } = await syncedReplica(t, primary);
  const { post } = await receiverOn(t, primary.url, 1);
  const body = webhookBody('replicated-order', 'evt_replicated');
  const jobKey = `bull:${WEBHOOK_QUEUE}:${webhookIdentity(Buffer.from(body)).jobId}`;

  await replica.pause();
  const refused = await post(body);
  assert.equal(refused.status, 503);
  assert.equal(refused.json.message, 'QUEUE_UNAVAILABLE');

  await replica.resume();
  await synced();
  const retried = await post(body);
  assert.deepEqual([retried.status, retried.json], [200, { received: true, duplicate: true }]);
  assert.equal(await client.exists(jobKey), 1, 'the replica holds the job the 200 promised');
});

test('with H2H_RECEIVER_REPLICA_ACKS=1 /readyz answers 503 while no replica is in sync with the primary, naming the setting, and ready once one is', async (t) => {
  const primary = await privateRedis(t);
  const { readyz } = await receiverOn(t, primary.url, 1);

  const alone = await readyz();
  assert.equal(alone.status, 503);
  assert.match(
    String(alone.json.error),
    /^not ready: 0 replica\(s\) in sync with the Redis primary, H2H_RECEIVER_REPLICA_ACKS asks for 1/,
  );

  await syncedReplica(t, primary);
  await waitFor(async () => (await readyz()).status === 200, { message: 'ready with the replica in sync' });
  assert.deepEqual((await readyz()).json, { status: 'ready' });
});

test('with H2H_RECEIVER_REPLICA_ACKS=0 (the default) the receiver answers 200 once the primary has the job, replica or not', async (t) => {
  const primary = await privateRedis(t);
  const { replica } = await syncedReplica(t, primary);
  const { post } = await receiverOn(t, primary.url, 0);
  await replica.pause();

  const answer = await post(webhookBody('primary-only-order', 'evt_primary_only'));

  assert.deepEqual([answer.status, answer.json], [200, { received: true, duplicate: false }]);
});

/**
 * A TCP proxy to one Redis server, then, after `switchTo`, to another: what a failover behind a
 * virtual address or a proxy looks like to a client. `switchTo` cuts every connection, so the
 * client reconnects to the new server. Stopped when the test ends.
 */
async function switchableProxy(t: Pick<TestContext, 'after'>, first: RedisServer) {
  let target = first.port;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(target, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    switchTo(next: RedisServer) {
      target = next.port;
      for (const socket of sockets) socket.destroy();
    },
  };
}

test('a WAIT that a failover cut off is not trusted: the webhook the old primary held alone is refused (the receiver’s 503), not acknowledged by the new primary', async (t) => {
  const oldPrimary = await privateRedis(t);
  const { replica: oldReplica } = await syncedReplica(t, oldPrimary);
  const newPrimary = await privateRedis(t);
  const { client: newReplica } = await syncedReplica(t, newPrimary);
  const proxy = await switchableProxy(t, oldPrimary);
  const producer = createWebhookProducer({
    redisUrl: proxy.url,
    replicaAcks: 1,
    replicaAckTimeoutMs: 4000,
    enqueueTimeoutMs: 10_000,
  });
  t.after(() => producer.close());
  await producer.ping();
  const admin = new Redis(oldPrimary.url);
  admin.on('error', () => {});
  t.after(() => admin.disconnect());
  await oldReplica.pause();

  const body = webhookBody('cut-off-order', 'evt_cut_off');
  const jobKey = `bull:${WEBHOOK_QUEUE}:${webhookIdentity(Buffer.from(body)).jobId}`;
  const enqueued = producer.enqueueWebhook({
    rawBody: Buffer.from(body),
    headerEventId: null,
    timestamp: Math.floor(Date.now() / 1000),
  });
  // Whatever it comes to, it is asserted below; a rejection before then is not "unhandled".
  enqueued.catch(() => {});
  // The job is on the old primary, whose replica acknowledges nothing: the receiver's WAIT blocks.
  await waitFor(
    async () =>
      String(await admin.client('LIST'))
        .split('\n')
        .some((line) => / name=h2h-receiver /.test(line) && / cmd=wait /.test(line)),
    { message: "the receiver's WAIT blocked on the old primary" },
  );
  proxy.switchTo(newPrimary);

  // Refused for the reconnect itself (ioredis sent the WAIT again on the new connection, where
  // the new primary's replica acknowledged at once): an acknowledgement would promise a webhook
  // the failover lost.
  await assert.rejects(enqueued, (error: Error) => {
    assert.ok(error instanceof QueueUnavailableError, String(error));
    assert.match(
      error.message,
      /connection to Redis was replaced between the add of webhook job .* and its WAIT/,
    );
    return true;
  });
  assert.equal(await newReplica.exists(jobKey), 0, 'the new primary and its replica never had the job');
});
