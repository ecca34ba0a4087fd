import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PublicJson } from '../../src/cli/public-json.js';
import { sha256Hex } from '../../src/queue/job-ids.js';
import type { FailedEvent, RetrySummary } from '../../src/worker/failed-events.js';
import { runCli } from '../helpers/cli.js';
import { ISO_UTC } from '../helpers/public-json.js';
import { privateRedis } from '../helpers/redis.js';
import { openTestStore, scheduleSettings, snapshot, tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import {
  cleanupScope,
  queueWebhook,
  startTestWorker,
  testProducer,
  webhookBodyOf,
} from '../helpers/worker.js';

test('events failed lists parked events with their reason; events retry requeues one or all of them', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  const env = { REDIS_URL: redis.url, H2H_DB_PATH: dbPath };
  const producer = await testProducer(t, redis.url);
  const { eventWorker } = await startTestWorker(t, { redisUrl: redis.url, dbPath });

  // A body that is not JSON can never apply. An event naming its order only by invoice number
  // cannot apply while that order is unknown here, and can once the create answer has arrived.
  const garbled = await queueWebhook(producer, 'not json at all', 'evt_garbled');
  const early = await queueWebhook(
    producer,
    webhookBodyOf({ invoice_number: 'INV-late-1', status: 'SUCCESS', serial_number: 'SN-L' }, 'evt_early'),
    'evt_early',
  );
  const stateOf = async (jobId: string) => (await producer.webhookQueue.getJob(jobId))?.getState();
  await waitFor(async () => (await producer.webhookQueue.getFailedCount()) === 2, {
    message: '2 failed jobs',
  });

  const listed = await runCli(['events', 'failed', '--json'], env);
  assert.equal(listed.code, 0, listed.stderr);
  const { total, events } = JSON.parse(listed.stdout) as {
    total: number;
    events: PublicJson<FailedEvent>[];
  };
  assert.equal(total, 2);
  const byId = new Map(events.map((e) => [e.job_id, e]));
  const shown = byId.get(garbled)!;
  assert.deepEqual(
    { ...shown, received_at: 'set', failed_at: 'set' },
    {
      job_id: garbled,
      failed_reason: shown.failed_reason,
      attempts_made: 1,
      received_at: 'set',
      failed_at: 'set',
      event_id: null,
      header_event_id: 'evt_garbled',
      dedupe_key: `body-sha256:${sha256Hex('not json at all')}`,
      body_preview: 'not json at all',
    },
  );
  assert.match(shown.received_at ?? '', ISO_UTC);
  assert.match(shown.failed_at ?? '', ISO_UTC);
  assert.match(shown.failed_reason, /^UNPARSEABLE_BODY: the body is not JSON/);
  assert.match(byId.get(early)!.failed_reason, /^INVALID_SNAPSHOT: order INV-late-1 is unknown locally/);
  assert.match(byId.get(early)!.body_preview, /^\{"event_id":"evt_early",/);

  const table = await runCli(['events', 'failed', '--limit', '1'], env);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /│ Job id +│ Failed reason/);
  assert.match(table.stdout, /2 failed webhook events \(newest 1 shown\)/);

  // The create answer arrives: the order is known by its invoice number now.
  const store = await openTestStore(dbPath, scheduleSettings());
  t.after(() => store.close());
  await store.writer.createLocalOrder({
    partnerRef: 'late-1',
    productCode: 'ML86',
    data: { user_id: '12345678', server_id: '2001' },
  });
  await store.writer.applyOrderSnapshot(snapshot('late-1', 'PENDING', { invoice_number: 'INV-late-1' }), {
    source: 'create',
  });

  const one = await runCli(['events', 'retry', early, '--json'], env);
  assert.equal(one.code, 0, one.stderr);
  assert.deepEqual(JSON.parse(one.stdout) as RetrySummary, { retried: [early], skipped: [] });
  await waitFor(async () => (await stateOf(early)) === 'completed', {
    message: 'the retried event completed',
  });
  assert.deepEqual(
    [
      (await store.queries.getOrder('late-1'))?.status,
      (await store.queries.getOrder('late-1'))?.serialNumber,
    ],
    ['SUCCESS', 'SN-L'],
  );

  const all = await runCli(['events', 'retry', '--all'], env);
  assert.equal(all.code, 0, all.stderr);
  assert.equal(all.stdout, `requeued 1 failed webhook event: ${garbled}\n`);
  // Nothing about the garbled body changed, so it is parked again, at its first attempt.
  await waitFor(async () => (await stateOf(garbled)) === 'failed', {
    message: 'the garbled event failed again',
  });
  assert.equal((await producer.webhookQueue.getJob(garbled))?.attemptsMade, 1);
  assert.equal(eventWorker.stats().committed, 1);

  const missing = await runCli(['events', 'retry', 'no-such-job', '--json'], env);
  assert.equal(missing.code, 1);
  assert.equal(JSON.parse(missing.stdout).error.code, 'EVENT_NOT_FOUND');
  const notFailed = await runCli(['events', 'retry', 'evt_early'], env);
  assert.equal(notFailed.code, 1);
  assert.match(notFailed.stderr, /webhook job ev-evt_early is completed, not failed/);
  const neither = await runCli(['events', 'retry'], env);
  assert.equal(neither.code, 1);
  assert.match(neither.stderr, /give either a job id .* or --all/);
});

test('events failed names the fix when Redis cannot be reached', async () => {
  const answer = await runCli(['events', 'failed'], { REDIS_URL: 'redis://127.0.0.1:1' });
  assert.equal(answer.code, 2);
  assert.match(
    answer.stderr,
    /cannot reach Redis at REDIS_URL=redis:\/\/127\.0\.0\.1:1 .*start Redis or set REDIS_URL/,
  );
});
