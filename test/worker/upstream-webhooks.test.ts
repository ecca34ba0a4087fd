import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deliveryHeaders, SECRET, startTestReceiver } from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { openTestStore, scheduleSettings, snapshot, tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope, startTestWorker, webhookBodyOf } from '../helpers/worker.js';

const BETA_SECRET = 'beta-webhook-secret';

/** A receiver of two upstreams (default and beta), a worker, and a store with one default order. */
async function twoUpstreams(test: Parameters<typeof privateRedis>[0]) {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  const store = await openTestStore(dbPath, scheduleSettings());
  t.after(() => store.close());
  const receiver = await startTestReceiver(t, {
    redis,
    upstreams: [
      { name: 'default', secrets: [SECRET] },
      { name: 'beta', secrets: [BETA_SECRET] },
    ],
  });
  return { t, redis, dbPath, store, receiver };
}

test("each upstream's webhooks are taken at its own path with its own secret, and another's secret is refused there", async (t) => {
  const { receiver } = await twoUpstreams(t);
  const body = webhookBodyOf(snapshot('R1', 'SUCCESS'), 'evt_paths');

  const beta = await receiver.post(
    body,
    deliveryHeaders(body, { secret: BETA_SECRET }),
    '/webhooks/h2h/beta',
  );
  const defaultSecretAtBeta = await receiver.post(body, deliveryHeaders(body), '/webhooks/h2h/beta');
  const betaSecretAtDefault = await receiver.post(
    body,
    deliveryHeaders(body, { secret: BETA_SECRET }),
    '/webhooks/h2h',
  );
  const unknown = await receiver.post(body, deliveryHeaders(body), '/webhooks/h2h/gamma');

  assert.equal(beta.statusCode, 200);
  assert.equal(defaultSecretAtBeta.statusCode, 401);
  assert.equal(betaSecretAtDefault.statusCode, 401);
  assert.equal(unknown.statusCode, 404);
  assert.match(unknown.json().error, /webhooks are POSTed to \/webhooks\/h2h or \/webhooks\/h2h\/<upstream>/);
  assert.equal(
    unknown.json().error.includes('beta'),
    false,
    "the upstreams' names are not told to the internet",
  );
  const job = await receiver.producer.webhookQueue.getJob('ev@beta@-evt_paths');
  assert.equal(job?.data.upstream, 'beta', 'the queued event says which upstream signed it');
});

test("a webhook is applied only to an order on the upstream whose secret signed it; two suppliers' equal event ids are two events", async (t) => {
  const { t: scope, redis, dbPath, store, receiver } = await twoUpstreams(t);
  await store.writer.createLocalOrder({
    partnerRef: 'R1',
    productCode: 'ML86',
    data: { user_id: '12345678' },
  });
  await store.writer.applyOrderSnapshot(snapshot('R1', 'PROCESSING'), { source: 'create' });
  await startTestWorker(scope, { redisUrl: redis.url, dbPath });
  // Both suppliers happen to number their events alike: the same event id, the same body.
  const body = webhookBodyOf(snapshot('R1', 'SUCCESS', { serial_number: 'SN-1' }), 'evt_same');

  const fromBeta = await receiver.post(
    body,
    deliveryHeaders(body, { secret: BETA_SECRET }),
    '/webhooks/h2h/beta',
  );
  const betaEvent = await waitFor(
    async () => (await store.queries.listEvents('R1')).find((e) => e.source === 'webhook'),
    { message: "beta's event recorded" },
  );
  assert.equal(fromBeta.json().duplicate, false);
  assert.equal(betaEvent.reason, 'wrong_upstream');
  assert.equal(betaEvent.changed, false);
  assert.equal(
    (await store.queries.getOrder('R1'))?.status,
    'PROCESSING',
    "another supplier's word changes nothing",
  );

  const fromDefault = await receiver.post(body, deliveryHeaders(body), '/webhooks/h2h');
  assert.equal(fromDefault.json().duplicate, false, "beta's event id does not shadow the default upstream's");
  const order = await waitFor(
    async () => {
      const current = await store.queries.getOrder('R1');
      return current?.status === 'SUCCESS' ? current : undefined;
    },
    { message: "the default upstream's SUCCESS applied" },
  );
  assert.equal(order.serialNumber, 'SN-1');
  assert.equal(order.upstream, 'default');
});

test('an order first heard of in a webhook is recorded on the upstream that signed it', async (t) => {
  const { t: scope, redis, dbPath, store, receiver } = await twoUpstreams(t);
  await startTestWorker(scope, { redisUrl: redis.url, dbPath });
  const body = webhookBodyOf(snapshot('placed-elsewhere', 'PROCESSING'), 'evt_elsewhere');

  await receiver.post(body, deliveryHeaders(body, { secret: BETA_SECRET }), '/webhooks/h2h/beta');

  const order = await waitFor(() => store.queries.getOrder('placed-elsewhere'), {
    message: 'the order recorded',
  });
  assert.equal(order.upstream, 'beta');
});
