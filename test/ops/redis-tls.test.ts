// Redis over TLS behind Sentinel (docs/deployment.md, "Redis with Sentinel"): `rediss://` in
// REDIS_URL makes every connection TLS, to the sentinels and to the primary they name. The
// primary, its replica and the sentinels serve TLS only; the receiver trusts their private CA
// through NODE_EXTRA_CA_CERTS, as a deployment would.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { startSentinelGroup } from '../../src/dev/redis-sentinel.js';
import { freePort } from '../../src/dev/redis-server.js';
import { WEBHOOK_QUEUE, webhookIdentity } from '../../src/queue/webhook-queue.js';
import { deliveryHeaders, SECRET, webhookBody } from '../helpers/receiver.js';
import { loopbackCertificates } from '../helpers/tls.js';
import { cleanupScope, spawnReady } from '../helpers/worker.js';

test('with rediss:// and sentinels that serve TLS only, the receiver queues a webhook on the primary over TLS', {
  timeout: 60_000,
}, async (test) => {
  const t = cleanupScope(test);
  const tls = loopbackCertificates(t);
  const group = await startSentinelGroup({ tls });
  t.after(() => group.stop());
  const port = await freePort();
  await spawnReady(t, 'receiver', {
    env: {
      PATH: process.env.PATH ?? '',
      NODE_EXTRA_CA_CERTS: tls.ca,
      REDIS_URL: 'rediss://127.0.0.1',
      H2H_REDIS_SENTINELS: group.sentinels.join(','),
      H2H_REDIS_SENTINEL_MASTER: group.masterName,
      H2H_API_SECRET: SECRET,
      HOST: '127.0.0.1',
      PORT: String(port),
      H2H_RECEIVER_METRICS_PORT: '0',
    },
  });
  const body = webhookBody('tls-order', 'evt_tls');

  const answer = await request(`http://127.0.0.1:${port}/webhooks/h2h`, {
    method: 'POST',
    headers: deliveryHeaders(body),
    body,
  });

  assert.deepEqual(
    [answer.statusCode, await answer.body.json()],
    [200, { received: true, duplicate: false }],
  );
  const primary = new Redis(group.primary.port, '127.0.0.1', { tls: { ca: readFileSync(tls.ca) } });
  t.after(() => primary.disconnect());
  const jobKey = `bull:${WEBHOOK_QUEUE}:${webhookIdentity(Buffer.from(body)).jobId}`;
  assert.equal(await primary.exists(jobKey), 1, 'the job is on the primary');
});
