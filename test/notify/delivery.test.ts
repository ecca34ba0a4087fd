import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildApiApp } from '../../src/api/app.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { defaultApiLimits } from '../helpers/api.js';
import {
  liveOrder,
  type NotificationBody,
  notifySetup,
  seqOf,
  startTestNotifier,
  verifyNotification,
} from '../helpers/notify.js';
import { snapshot, tempStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { failFirst, hangFirst, startWebhookSink, type WebhookDelivery } from '../helpers/webhook-sink.js';
import { cleanupScope } from '../helpers/worker.js';

/**
 * Every delivered (2xx) notification, verified with `standardwebhooks`; asserts that each feed
 * event reached the endpoint, and that the events of each order arrived in feed order.
 */
function assertAllDeliveredInOrder(
  deliveries: readonly WebhookDelivery[],
  secret: string,
  expectedSeqs: readonly number[],
): NotificationBody[] {
  const delivered = deliveries.filter((d) => typeof d.answer === 'number' && d.answer < 300);
  const bodies = delivered.map((d) => verifyNotification(secret, d));
  assert.deepEqual(
    [...new Set(delivered.map(seqOf))].sort((a, b) => a - b),
    [...expectedSeqs],
  );
  const versionsByRef = new Map<string, number[]>();
  for (const body of bodies) {
    const list = versionsByRef.get(body.data.partner_ref) ?? [];
    list.push(body.data.version);
    versionsByRef.set(body.data.partner_ref, list);
  }
  for (const [ref, versions] of versionsByRef) {
    assert.deepEqual(
      versions,
      [...versions].sort((a, b) => a - b),
      `${ref} arrived in order`,
    );
  }
  return bodies;
}

/** The endpoint's history once `n` deliveries are recorded in it. */
function historySettled(store: OrderStore, endpointId: number, n: number) {
  return waitFor(
    async () => {
      const history = await store.deliveries.history({ endpointId });
      return history.filter((h) => h.outcome === 'delivered').length >= n ? history : undefined;
    },
    { message: `${n} deliveries recorded` },
  );
}

const delivered = (d: WebhookDelivery) => typeof d.answer === 'number' && d.answer < 300;

test('every event of the feed reaches the endpoint signed per Standard Webhooks, with the whole order and the status it had before', async (t) => {
  const { scope, store, sink, secret, endpoint } = await notifySetup(t);
  await startTestNotifier(scope, { store });
  await liveOrder(store, 'N-1');
  await liveOrder(store, 'N-2');
  await store.writer.applyOrderSnapshot(snapshot('N-1', 'REFUNDED', { serial_number: 'SN-N-1' }), {
    source: 'webhook',
    eventId: 'N-1-r',
  });
  const seqs = (await store.feed.after(0, 1000)).map((e) => e.seq);
  await sink.waitForDeliveries(delivered, seqs.length);

  const bodies = assertAllDeliveredInOrder(sink.deliveries, secret, seqs);
  const first = sink.deliveries.find((d) => seqOf(d) === seqs[0])!;
  assert.equal(first.headers['content-type'], 'application/json');
  assert.match(String(first.headers['webhook-timestamp']), /^\d{10}$/);
  assert.deepEqual(
    bodies.find((b) => b.data.version === 5 && b.data.partner_ref === 'N-1'),
    {
      type: 'order.updated',
      timestamp: (await store.feed.get(seqs.at(-1)!))!.timestamp,
      previous_status: 'SUCCESS',
      data: await store.queries.getPublicOrder('N-1'),
    },
  );
  const transitions = (ref: string) =>
    bodies
      .filter((b) => b.data.partner_ref === ref)
      .map((b) => [b.data.version, b.type, b.previous_status, b.data.status]);
  assert.deepEqual(transitions('N-1'), [
    [1, 'order.submitted', null, 'PENDING'],
    [2, 'order.updated', 'PENDING', 'PROCESSING'],
    [3, 'order.updated', 'PROCESSING', 'SUCCESS'],
    [4, 'order.updated', 'SUCCESS', 'SUCCESS'],
    [5, 'order.updated', 'SUCCESS', 'REFUNDED'],
  ]);
  assert.deepEqual(transitions('N-2'), transitions('N-1').slice(0, 4));
  // The worker records an attempt once the answer is in: just after the sink has counted it.
  const history = await historySettled(store, endpoint.id, seqs.length);
  assert.equal(history.length, seqs.length);
  assert.ok(history.every((h) => h.outcome === 'delivered' && h.status === 200 && h.attempt === 1));
});

test('an order the shop cancels reaches an endpoint subscribed to order.* as a signed order.cancelled notification with the cancelled order', async (t) => {
  const { scope, store, sink, secret } = await notifySetup(t);
  await startTestNotifier(scope, { store });
  const api = await buildApiApp({ store, ...defaultApiLimits() });
  scope.after(() => api.close());
  const { token } = await store.tokens.create('shop', ['orders:write']);
  const asShop = { authorization: `Bearer ${token}` };
  const placed = await api.inject({
    method: 'POST',
    url: '/v1/orders',
    headers: asShop,
    payload: {
      product_code: 'MLBB-86',
      partner_ref: 'C-1',
      data: { user_id: '12345678', server_id: '2001' },
    },
  });
  assert.equal(placed.statusCode, 202);
  const cancelled = await api.inject({ method: 'POST', url: '/v1/orders/C-1/cancel', headers: asShop });
  assert.equal(cancelled.statusCode, 200);

  const [delivery] = await sink.waitForDeliveries(delivered, 1);
  const body = verifyNotification(secret, delivery!);
  const [event] = await store.feed.after(0, 10);
  assert.equal(delivery!.headers['webhook-id'], `evt_${event!.seq}`);
  assert.deepEqual(body, {
    type: 'order.cancelled',
    timestamp: event!.timestamp,
    previous_status: null,
    data: cancelled.json(),
  });
  assert.equal(body.data.submission, 'cancelled');
  assert.equal(body.data.outcome, 'cancelled');
  assert.equal((body.data.cancellation as { code: string }).code, 'CANCELLED');
});

test('an endpoint answering 500 gets every event once it recovers, each order in sequence', async (t) => {
  const { scope, store, sink, secret, endpoint } = await notifySetup(t, failFirst(12, 500));
  const notifier = await startTestNotifier(scope, { store });
  for (const ref of ['F-1', 'F-2', 'F-3']) await liveOrder(store, ref);
  const seqs = (await store.feed.after(0, 1000)).map((e) => e.seq);
  await sink.waitForDeliveries(delivered, seqs.length);
  assertAllDeliveredInOrder(sink.deliveries, secret, seqs);
  const history = await historySettled(store, endpoint.id, seqs.length);
  const retried = history.filter((h) => h.outcome === 'retrying');
  assert.equal(retried.length, 12);
  assert.ok(retried.every((h) => h.status === 500));
  const metrics = await notifier.metrics.registry.metrics();
  assert.match(metrics, /h2h_notify_deliveries_total\{outcome="retrying"\} 12\n/);
  assert.match(metrics, new RegExp(`h2h_notify_deliveries_total\\{outcome="delivered"\\} ${seqs.length}\\n`));
});

test('an endpoint that is down (connection refused) gets every event once it is back', async (t) => {
  const scope = cleanupScope(t);
  const { store } = await tempStore(scope, { now: Date.now });
  const secret = generateEndpointSecret();
  // A port that answers nothing yet: the sink's, closed, then opened again on the same port.
  const first = await startWebhookSink(scope, { secrets: [] });
  await first.close();
  const endpoint = await store.endpoints.add({ url: first.url, events: ['order.*'], secret });
  await startTestNotifier(scope, { store });
  await liveOrder(store, 'D-1');
  await waitFor(async () => (await store.deliveries.history({ endpointId: endpoint.id })).length >= 2, {
    message: 'two refused attempts',
  });
  assert.match((await store.deliveries.history({ endpointId: endpoint.id }))[0]!.error ?? '', /ECONNREFUSED/);
  const sink = await startWebhookSink(scope, { secrets: [], port: Number(new URL(first.url).port) });
  const seqs = (await store.feed.after(0, 1000)).map((e) => e.seq);
  await sink.waitForDeliveries(delivered, seqs.length);
  assertAllDeliveredInOrder(sink.deliveries, secret, seqs);
});

test('an endpoint slower than the time-out gets every event once it answers in time', async (t) => {
  const { scope, store, sink, secret, endpoint } = await notifySetup(t, hangFirst(3));
  await startTestNotifier(scope, { store, timeoutMs: 300 });
  await liveOrder(store, 'S-1');
  await liveOrder(store, 'S-2');
  const seqs = (await store.feed.after(0, 1000)).map((e) => e.seq);
  await sink.waitForDeliveries(delivered, seqs.length);
  assertAllDeliveredInOrder(sink.deliveries, secret, seqs);
  const timedOut = (await store.deliveries.history({ endpointId: endpoint.id })).filter(
    (h) => h.status === null,
  );
  assert.equal(timedOut.length, 3);
  assert.match(timedOut[0]!.error ?? '', /no answer within 300 ms/);
});

test('410 Gone disables the endpoint: nothing more is sent to it', async (t) => {
  const { scope, store, sink, endpoint } = await notifySetup(t, () => 410);
  const notifier = await startTestNotifier(scope, { store });
  await liveOrder(store, 'G-1');
  await waitFor(async () => (await store.endpoints.get(endpoint.id))!.disabledAt !== null, {
    message: 'the endpoint disabled',
  });
  assert.match((await store.endpoints.get(endpoint.id))!.disabledReason ?? '', /410/);
  await liveOrder(store, 'G-2');
  await notifier.dispatchNow();
  await waitFor(
    async () => (await store.outbox.backlog((await store.endpoints.get(endpoint.id))!, [])).pending === 0,
    {
      message: 'the outbox emptied',
    },
  );
  assert.equal(sink.deliveries.length, 1, 'one request, answered 410; the rest were skipped');
  const outcomes = (await store.deliveries.history({ endpointId: endpoint.id })).map((h) => h.outcome);
  assert.deepEqual(
    outcomes.filter((o) => o !== 'skipped'),
    ['disabled'],
  );
});

test('during a secret rotation both secrets sign: a shop holding either one verifies', async (t) => {
  const { scope, store, sink, secret: oldSecret, endpoint } = await notifySetup(t);
  const newSecret = generateEndpointSecret();
  await store.endpoints.rotateSecret(endpoint.id, newSecret, 3_600_000);
  await startTestNotifier(scope, { store });
  await liveOrder(store, 'R-1');
  const [first] = await sink.waitForDeliveries(delivered, 1);
  assert.equal(String(first!.headers['webhook-signature']).split(' ').length, 2);
  verifyNotification(oldSecret, first!);
  verifyNotification(newSecret, first!);
});
