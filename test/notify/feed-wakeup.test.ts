// The notifier is woken by feed commits (feed.watch, docs/store-backends.md, "Waking the feed's
// readers"): with its timer far away, an event is still sent at once — its own process's commit
// and another process's, on both backends (SQLite: the write-ahead log's changes; PostgreSQL:
// LISTEN/NOTIFY).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { seqOf, startTestNotifier, verifyNotification } from '../helpers/notify.js';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import { cleanupScope } from '../helpers/worker.js';

describeEachBackend('the notifier woken by feed commits', (backend) => {
  test('with the dispatch timer at 10 minutes, a committed event is delivered at once', async (t) => {
    const scope = cleanupScope(t);
    const { store, url } = await backend.tempStore(scope, { now: Date.now });
    const sink = await startWebhookSink(scope, { secrets: [] });
    const secret = generateEndpointSecret();
    await store.endpoints.add({ url: sink.url, events: ['order.*'], secret });
    // The first pass runs at start (and on PostgreSQL one when its listener connects); the next on
    // the timer would be 10 minutes later. A pass asked now runs after those: once it is done,
    // only a wake-up can send what is committed next.
    const notifier = await startTestNotifier(scope, { store, dispatchEveryMs: 600_000 });
    await notifier.dispatchNow();

    await store.writer.applyOrderSnapshot(snapshot('K1', 'PENDING'), { source: 'create' });
    await waitFor(() => sink.deliveries.some((d) => seqOf(d) === 1), {
      timeoutMs: 10_000,
      message: 'the event of this process’s commit delivered before the timer',
    });
    assert.equal(verifyNotification(secret, sink.deliveries[0]!).data.partner_ref, 'K1');

    // Another process (a store of its own connections on the same database) commits.
    const other = await backend.open(scope, url);
    await other.writer.applyOrderSnapshot(snapshot('K2', 'PENDING'), { source: 'create' });
    await waitFor(() => sink.deliveries.some((d) => seqOf(d) === 2), {
      timeoutMs: 10_000,
      message: 'the event of another process’s commit delivered before the timer',
    });
  });
});
