import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { runCli } from '../helpers/cli.js';
import { verifyNotification } from '../helpers/notify.js';
import { ISO_UTC, publicFormBreaches } from '../helpers/public-json.js';
import { openTestStore, scheduleSettings, tempDbPath } from '../helpers/store.js';
import { startWebhookSink, type WebhookDelivery } from '../helpers/webhook-sink.js';
import { cleanupScope } from '../helpers/worker.js';

/**
 * `h2h-sync endpoints test ID`, run as a shop developer runs it, against a shop on 127.0.0.1 that
 * verifies every request with the `standardwebhooks` package under the secrets it was given and
 * answers 204, or 401 when none verifies.
 */
async function shopSetup(t: Parameters<typeof cleanupScope>[0]) {
  const scope = cleanupScope(t);
  const dbPath = tempDbPath(scope);
  const env = { H2H_DB_PATH: dbPath };
  const shop = { secrets: [] as string[] };
  const verifies = (delivery: Omit<WebhookDelivery, 'answer'>) =>
    shop.secrets.some((secret) => {
      try {
        verifyNotification(secret, delivery as WebhookDelivery);
        return true;
      } catch {
        return false;
      }
    });
  const sink = await startWebhookSink(scope, { secrets: [], answer: (d) => (verifies(d) ? 204 : 401) });
  const added = await runCli(['endpoints', 'add', sink.url, '--events', 'order.*', '--json'], env);
  assert.equal(added.code, 0, added.stderr);
  const endpoint = JSON.parse(added.stdout) as { id: number; secret: string };
  return { scope, dbPath, env, shop, sink, endpoint };
}

test('endpoints test sends one endpoint.test notification signed with the endpoint secret, prints the 2xx answer, exits 0 and writes nothing to the store', async (t) => {
  const { scope, dbPath, env, shop, sink, endpoint } = await shopSetup(t);
  shop.secrets = [endpoint.secret];

  const run = await runCli(['endpoints', 'test', String(endpoint.id)], env);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, new RegExp(`endpoint ${endpoint.id} \\(${sink.url}\\) answered 204 in \\d+ ms`));
  assert.match(run.stdout, /^ok: /m);
  assert.equal(sink.deliveries.length, 1, 'one request');
  const [first] = sink.deliveries;
  assert.equal(first!.answer, 204);
  // Sent though the endpoint wants only order.*: a test is asked for, not subscribed to.
  const body = verifyNotification(endpoint.secret, first!) as unknown as {
    type: string;
    timestamp: string;
    data: { endpoint_id: number };
  };
  assert.equal(body.type, 'endpoint.test');
  assert.equal(body.data.endpoint_id, endpoint.id);
  assert.match(body.timestamp, ISO_UTC);
  assert.match(String(first!.headers['webhook-id']), /^test_[0-9a-f-]{36}$/);

  const json = await runCli(['endpoints', 'test', String(endpoint.id), '--json'], env);
  assert.equal(json.code, 0, json.stderr);
  const result = JSON.parse(json.stdout) as Record<string, unknown>;
  assert.deepEqual(publicFormBreaches(result), []);
  assert.deepEqual(
    [result.endpoint_id, result.url, result.state, result.type, result.status, result.ok, result.error],
    [endpoint.id, sink.url, 'enabled', 'endpoint.test', 204, true, null],
  );
  assert.equal(typeof result.duration_ms, 'number');
  assert.match(String(result.sent_at), ISO_UTC);
  assert.equal(sink.deliveries.length, 2);
  assert.equal(result.webhook_id, sink.deliveries[1]!.headers['webhook-id']);
  assert.notEqual(result.webhook_id, first!.headers['webhook-id'], 'a new webhook-id for every test');

  // Not an order event: no feed event, no outbox row, no delivery history.
  const store = await openTestStore(dbPath, scheduleSettings(), { now: Date.now });
  scope.after(() => store.close());
  assert.deepEqual(await store.feed.after(0, 100), []);
  const backlog = await store.outbox.backlog((await store.endpoints.get(endpoint.id))!, ['endpoint.test']);
  assert.equal(backlog.pending, 0);
  assert.deepEqual(await store.deliveries.history(), []);
});

test('endpoints test during a secret rotation carries both signatures, so a shop still on the old secret accepts it', async (t) => {
  const { env, shop, sink, endpoint } = await shopSetup(t);
  const rotated = await runCli(['endpoints', 'rotate-secret', String(endpoint.id), '--json'], env);
  assert.equal(rotated.code, 0, rotated.stderr);
  const { secret: newSecret } = JSON.parse(rotated.stdout) as { secret: string };
  shop.secrets = [endpoint.secret];

  const run = await runCli(['endpoints', 'test', String(endpoint.id)], env);
  assert.equal(run.code, 0, run.stderr);
  const [delivery] = sink.deliveries;
  assert.equal(String(delivery!.headers['webhook-signature']).split(' ').length, 2);
  verifyNotification(newSecret, delivery!);
  verifyNotification(endpoint.secret, delivery!);
});

test('endpoints test exits 1 with the fix when the shop refuses it, when nothing listens, and for an unknown endpoint', async (t) => {
  const { env, shop, sink, endpoint } = await shopSetup(t);
  shop.secrets = [generateEndpointSecret()]; // the shop was given another secret

  const refused = await runCli(['endpoints', 'test', String(endpoint.id)], env);
  assert.equal(refused.code, 1);
  assert.match(refused.stdout, /answered 401 in \d+ ms/);
  assert.match(
    refused.stderr,
    /^error: ENDPOINT_REFUSED: .* answered 401: .*Fix: verify the signature with this endpoint's secret .*raw body/m,
  );
  const refusedJson = await runCli(['endpoints', 'test', String(endpoint.id), '--json'], env);
  assert.equal(refusedJson.code, 1);
  const result = JSON.parse(refusedJson.stdout) as {
    status: number;
    ok: boolean;
    error: Record<string, string>;
  };
  assert.deepEqual([result.status, result.ok, result.error.code], [401, false, 'ENDPOINT_REFUSED']);
  assert.match(result.error.fix!, /docs\/shop\.md/);
  assert.equal(sink.deliveries.length, 2);

  await sink.close();
  const down = await runCli(['endpoints', 'test', String(endpoint.id)], env);
  assert.equal(down.code, 1);
  assert.match(down.stdout, /gave no answer/);
  assert.match(
    down.stderr,
    /^error: ENDPOINT_UNREACHABLE: no answer from .*ECONNREFUSED.*Fix: nothing listens at /m,
  );

  const unknown = await runCli(['endpoints', 'test', String(endpoint.id + 1)], env);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /no endpoint \d+: see `h2h-sync endpoints list`/);
});
