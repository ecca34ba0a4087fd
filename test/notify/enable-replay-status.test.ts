import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StatusReport } from '../../src/cli/commands/status-actions.js';
import type { PublicJson } from '../../src/cli/public-json.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { runCli } from '../helpers/cli.js';
import { liveOrder, seqOf, startTestNotifier, verifyNotification } from '../helpers/notify.js';
import { privateRedis } from '../helpers/redis.js';
import { openTestStore, scheduleSettings, tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink, type WebhookDelivery } from '../helpers/webhook-sink.js';
import { cleanupScope } from '../helpers/worker.js';

const ok = (d: WebhookDelivery) => d.answer === 200;

test('an endpoint disabled by a 410 is enabled again from the next event on; what it missed is replayed by seq; status shows each backlog', async (t) => {
  const scope = cleanupScope(t);
  const redis = await privateRedis(scope);
  const dbPath = tempDbPath(scope);
  const env = { REDIS_URL: redis.url, H2H_DB_PATH: dbPath };
  let gone = true;
  const shop = await startWebhookSink(scope, { secrets: [], answer: () => (gone ? 410 : 200) });
  const store = await openTestStore(dbPath, scheduleSettings(), { now: Date.now });
  scope.after(() => store.close());
  const secret = generateEndpointSecret();
  const endpoint = await store.endpoints.add({ url: shop.url, events: ['order.*'], secret });
  // One failed attempt, then a minute's wait: a failing notification stays failing meanwhile.
  await startTestNotifier(scope, { store, retryScheduleMs: [60_000] });

  await liveOrder(store, 'E-1'); // seq 1-4: the first answered 410, the rest skipped
  await waitFor(
    async () =>
      (await store.deliveries.history({ endpointId: endpoint.id })).filter((d) => d.outcome !== 'retrying')
        .length === 4,
    {
      message: 'the 410 and the skips recorded',
    },
  );
  assert.match((await store.endpoints.get(endpoint.id))!.disabledReason ?? '', /410/);
  await liveOrder(store, 'E-2'); // seq 5-8: committed while disabled, not queued

  const whileDisabled = await runCli(['status', '--json'], env);
  assert.equal(whileDisabled.code, 0, whileDisabled.stderr);
  const [disabledLine] = (JSON.parse(whileDisabled.stdout) as PublicJson<StatusReport>).notifications;
  assert.equal(disabledLine!.state, 'disabled');
  assert.match(disabledLine!.disabled_reason ?? '', /410/);
  assert.equal(disabledLine!.pending, 4, 'E-2 was not sent');
  assert.equal(disabledLine!.failing, 0);
  assert.equal(typeof disabledLine!.oldest_pending_age_s, 'number');

  gone = false;
  const enabled = await runCli(['endpoints', 'enable', String(endpoint.id), '--json'], env);
  assert.equal(enabled.code, 0, enabled.stderr);
  const result = JSON.parse(enabled.stdout) as {
    state: string;
    changed: boolean;
    missed: { from_seq: number; to_seq: number } | null;
  };
  assert.equal(result.state, 'enabled');
  assert.equal(result.changed, true);
  assert.deepEqual(result.missed, { from_seq: 1, to_seq: 8 });
  const again = await runCli(['endpoints', 'enable', String(endpoint.id)], env);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /was enabled already: nothing changed/);

  // A second endpoint that fails: its order's first event is retried, the rest wait for it.
  const failingShop = await startWebhookSink(scope, { secrets: [], answer: () => 503 });
  const failing = await store.endpoints.add({ url: failingShop.url, events: ['order.*'], secret });
  await liveOrder(store, 'E-3'); // seq 9-12
  const fresh = await shop.waitForDeliveries(ok, 4);
  for (const delivery of fresh) assert.equal(verifyNotification(secret, delivery).data.partner_ref, 'E-3');
  assert.deepEqual(fresh.map(seqOf), [9, 10, 11, 12], 'from the next event on, in order');
  await waitFor(
    async () =>
      (await store.deliveries.history({ endpointId: failing.id })).some((h) => h.outcome === 'retrying'),
    { message: 'the failing endpoint retrying' },
  );

  const status = await runCli(['status', '--json'], env);
  assert.equal(status.code, 0, status.stderr);
  const lines = (JSON.parse(status.stdout) as PublicJson<StatusReport>).notifications;
  assert.deepEqual(
    lines.map((l) => [l.endpoint_id, l.state, l.pending, l.failing, l.gave_up]),
    [
      [endpoint.id, 'enabled', 0, 0, 0],
      [failing.id, 'enabled', 4, 1, 0],
    ],
  );
  assert.equal(lines[0]!.oldest_pending_age_s, null);
  assert.equal(typeof lines[1]!.oldest_pending_age_s, 'number');
  const text = await runCli(['status'], env);
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /Shop notifications:/);
  assert.match(text.stdout, new RegExp(`${failing.id} ${failingShop.url}.*enabled.*4.*1.*0`));

  // What it missed, by seq: E-2 only (1-4 went to the 410 and its skips, which stay so).
  const usage = await runCli(['notifications', 'resend'], env);
  assert.notEqual(usage.code, 0);
  assert.match(usage.stderr + usage.stdout, /--since ISO or --from-seq N/);
  const badSeq = await runCli(['notifications', 'resend', '--from-seq', '0'], env);
  assert.notEqual(badSeq.code, 0);
  assert.match(badSeq.stderr + badSeq.stdout, /--from-seq "0" is not a feed sequence number/);
  const replayed = await runCli(
    ['notifications', 'resend', '--endpoint', String(endpoint.id), '--from-seq', '5', '--to-seq', '8'],
    env,
  );
  assert.equal(replayed.code, 0, replayed.stderr);
  assert.match(replayed.stdout, /queued 4 notifications of 4 events/);
  const all = await shop.waitForDeliveries(ok, 8);
  assert.deepEqual(
    all
      .map(seqOf)
      .filter((seq) => seq < 9)
      .sort((a, b) => a - b),
    [5, 6, 7, 8],
  );
  for (const delivery of all) assert.ok(verifyNotification(secret, delivery));
});
