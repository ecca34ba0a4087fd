import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TailLine } from '../../src/cli/commands/tail-actions.js';
import type { PublicJson } from '../../src/cli/public-json.js';
import { loadConfig, receiverSettings } from '../../src/config/config.js';
import { startReceiver } from '../../src/receiver/server.js';
import { spawnCli } from '../helpers/cli.js';
import { ISO_UTC } from '../helpers/public-json.js';
import { deliveryHeaders, SECRET } from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { httpRequest } from '../helpers/simulator.js';
import { snapshot, tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope, startTestWorker, webhookBodyOf } from '../helpers/worker.js';

/** `h2h-sync tail --json` as a child process. */
const spawnTail = (t: { after(fn: () => unknown): void }, env: Record<string, string>) =>
  spawnCli(t, ['tail', '--json'], env);

test('tail --json prints a received line when a signed webhook is queued and an applied line when the worker applies it', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  const { store } = await startTestWorker(t, { redisUrl: redis.url, dbPath });
  const receiver = await startReceiver(
    receiverSettings(
      loadConfig({ REDIS_URL: redis.url, H2H_API_SECRET: SECRET, PORT: '0', H2H_RECEIVER_METRICS_PORT: '0' }),
    ),
  );
  t.after(() => receiver.close());
  // An order placed earlier: its create answer is history, not something tail shows.
  await store.writer.createLocalOrder({
    partnerRef: 'tail-1',
    productCode: 'MLBB-86',
    data: { user_id: '12345678', server_id: '2001' },
  });
  await store.writer.applyOrderSnapshot(snapshot('tail-1', 'PENDING'), { source: 'create' });

  const tail = spawnTail(t, { REDIS_URL: redis.url, H2H_DB_PATH: dbPath });
  await waitFor(() => tail.stderr().includes('Ctrl-C to stop') || tail.child.exitCode !== null, {
    message: 'tail to start following',
  });
  assert.equal(tail.child.exitCode, null, tail.stderr());

  const body = webhookBodyOf(snapshot('tail-1', 'SUCCESS', { serial_number: 'SN-TAIL-1' }), 'evt_tail_1');
  const delivered = await httpRequest(receiver.webhookUrl, { rawBody: body, headers: deliveryHeaders(body) });
  assert.equal(delivered.status, 200, delivered.text);

  // The two lines come from two sources (Redis queue events, the store), so either may be first.
  await waitFor(() => tail.jsonLines().length >= 2, {
    message: `two lines; stdout so far: ${tail.stdout()}`,
  });
  const lines = tail.jsonLines<PublicJson<TailLine>>().sort((a, b) => a.kind.localeCompare(b.kind));
  for (const line of lines) assert.match(line.time, ISO_UTC);
  assert.deepEqual(
    lines.map(({ time: _time, ...rest }) => rest),
    [
      {
        kind: 'applied',
        source: 'webhook',
        event_id: 'evt_tail_1',
        ref: 'tail-1',
        status: 'SUCCESS',
        changed: true,
        reason: 'transition',
      },
      { kind: 'received', source: 'webhook', event_id: 'evt_tail_1', ref: 'tail-1', status: 'SUCCESS' },
    ],
  );
  assert.equal((await store.queries.getOrder('tail-1'))?.status, 'SUCCESS');

  tail.child.kill('SIGINT');
  assert.equal(await tail.exited, 0, tail.stderr());
  assert.match(tail.stderr(), /^2 lines$/m);
});

test('tail refuses to start without a store, naming H2H_DB_PATH (exit 2)', async (t) => {
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  const tail = spawnTail(t, { REDIS_URL: redis.url, H2H_DB_PATH: dbPath });
  assert.equal(await tail.exited, 2);
  const { error } = JSON.parse(tail.stdout()) as { error: { message: string } };
  assert.match(error.message, /no store at .*H2H_DB_PATH/);
});
