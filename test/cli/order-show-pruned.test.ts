import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runRetentionPass } from '../../src/worker/store-retention.js';
import { runCli } from '../helpers/cli.js';
import { snapshot, tempStore } from '../helpers/store.js';

const DAY = 86_400_000;

test('order show says when the history retention deleted an order’s events, so an empty history is not read as none; --json gives history_pruned_at', async (t) => {
  const { store, path, clock } = await tempStore(t);
  const env = { H2H_DB_PATH: path };
  const settle = (ref: string) =>
    store.writer.applyOrderSnapshot(snapshot(ref, 'SUCCESS', { serial_number: `SN-${ref}` }), {
      source: 'webhook',
      eventId: `${ref}-success`,
    });
  await settle('OLD-1');
  clock.advance(100 * DAY);
  await settle('RECENT-1');
  const prunedAt = new Date(clock.now()).toISOString();
  const pass = await runRetentionPass(store, { feedRetentionMs: 30 * DAY, historyRetentionMs: 90 * DAY });
  assert.equal(pass.orders, 1, 'OLD-1 alone is past the retention');

  const old = await runCli(['order', 'show', 'OLD-1'], env);
  assert.equal(old.code, 0, old.stderr);
  assert.ok(
    old.stdout.includes(
      `The events and notification records before ${prunedAt} were deleted by the history retention (H2H_HISTORY_RETENTION_D)`,
    ),
    old.stdout,
  );
  const recent = await runCli(['order', 'show', 'RECENT-1'], env);
  assert.doesNotMatch(recent.stdout, /history retention/);

  const shown = async (ref: string) =>
    JSON.parse((await runCli(['order', 'show', ref, '--json'], env)).stdout) as {
      events: unknown[];
      history_pruned_at: string | null;
    };
  const oldJson = await shown('OLD-1');
  assert.deepEqual([oldJson.history_pruned_at, oldJson.events.length], [prunedAt, 0]);
  const recentJson = await shown('RECENT-1');
  assert.deepEqual([recentJson.history_pruned_at, recentJson.events.length], [null, 1]);
});
