import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { buildApiApp } from '../../src/api/app.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import type { FeedEvent } from '../../src/store/feed.js';
import { defaultApiLimits } from '../helpers/api.js';
import { liveOrder, seqOf, startTestNotifier, verifyNotification } from '../helpers/notify.js';
import { tempStore } from '../helpers/store.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import { cleanupScope } from '../helpers/worker.js';

test('the change feed read over the API from any cursor equals the notifications the shop received after it', async (t) => {
  const scope = cleanupScope(t);
  const { store } = await tempStore(scope, { now: Date.now });
  const sink = await startWebhookSink(scope, { secrets: [] });
  const secret = generateEndpointSecret();
  await store.endpoints.add({ url: sink.url, events: ['order.*'], secret });
  await startTestNotifier(scope, { store });
  for (const ref of ['FEED-1', 'FEED-2', 'FEED-3']) await liveOrder(store, ref);
  const total = (await store.feed.after(0, 1000)).length;
  await sink.waitForDeliveries((d) => typeof d.answer === 'number' && d.answer < 300, total);

  const api = await buildApiApp({ store, ...defaultApiLimits() });
  await api.listen({ host: '127.0.0.1', port: 0 });
  scope.after(() => api.close());
  const origin = `http://127.0.0.1:${(api.server.address() as { port: number }).port}`;
  const { token } = await store.tokens.create('shop', ['orders:read']);
  // The notifications as the shop keeps them: one per webhook-id, by feed position.
  const notified = new Map(sink.deliveries.map((d) => [seqOf(d), verifyNotification(secret, d)]));
  assert.equal(notified.size, total);

  for (const after of [0, 1, Math.floor(total / 2), total - 1, total]) {
    const answer = await request(`${origin}/v1/events?after=${after}&limit=1000`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const { data } = (await answer.body.json()) as { data: FeedEvent[] };
    assert.deepEqual(
      data.map(({ seq, ...body }) => [seq, body]),
      [...notified].filter(([seq]) => seq > after).sort(([a], [b]) => a - b),
      `from cursor ${after}`,
    );
  }
});
