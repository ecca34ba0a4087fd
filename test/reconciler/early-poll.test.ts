import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Queue } from 'bullmq';
import {
  POLL_REQUEST_JOB_NAME,
  POLL_REQUEST_JOB_OPTIONS,
  POLL_REQUEST_QUEUE,
  type PollRequestData,
  pollRequestJobId,
} from '../../src/queue/poll-request-queue.js';
import { classifyFailure } from '../../src/reconciler/poll-order.js';
import { startReconciler } from '../../src/reconciler/reconciler.js';
import { UpstreamError } from '../../src/upstream/errors.js';
import { type ReconcilerEnv, reconcilerEnv, targetFor } from '../helpers/reconciler.js';
import { waitFor } from '../helpers/wait.js';

/** Queues an early-poll request as the receiver does for a stale but authentic webhook. */
async function requestPoll(env: ReconcilerEnv, request: PollRequestData): Promise<void> {
  const queue = new Queue<PollRequestData>(POLL_REQUEST_QUEUE, { connection: { url: env.redis.url } });
  try {
    await queue.add(POLL_REQUEST_JOB_NAME, request, {
      ...POLL_REQUEST_JOB_OPTIONS,
      jobId: pollRequestJobId(request),
    });
  } finally {
    await queue.close();
  }
}

async function startFor(env: ReconcilerEnv) {
  // A long interval: only the poll requests poll here.
  const reconciler = await startReconciler({
    settings: { ...env.settings, everyMs: 3_600_000 },
    store: env.store,
    client: env.client,
    redisUrl: env.redis.url,
    logger: env.log.logger,
    metrics: env.metrics,
  });
  env.defer(() => reconciler.close());
  return reconciler;
}

async function upstreamOrder(env: ReconcilerEnv, partnerRef: string, suffix: string) {
  const answer = await env.sim.createOrder({ partner_ref: partnerRef, data: targetFor(suffix) });
  assert.equal(answer.status, 201);
  return answer.body;
}

test('a stale webhook’s early-poll request polls the order at once, even one settled locally, and finds the refund', async (t) => {
  const env = await reconcilerEnv(t, { sim: { timeScale: 0.001 } });
  await env.sim.setFaults({ webhook_drop: 1 });
  const created = await upstreamOrder(env, 'refund-1', '0006');
  await env.store.writer.applyOrderSnapshot(created, { source: 'create' });
  const refunded = await waitFor(async () =>
    (await env.sim.allOrders()).find((o) => o.status === 'REFUNDED'),
  );
  // Locally the SUCCESS-with-serial webhook arrived and settled the order; the refund's was lost.
  await env.store.writer.applyOrderSnapshot(
    { ...refunded, status: 'SUCCESS', message: null },
    { source: 'webhook', eventId: 'e-1' },
  );
  assert.equal((await env.store.queries.getOrder('refund-1'))!.nextPollAt, null);
  await startFor(env);

  await requestPoll(env, { partnerRef: 'refund-1', reason: 'stale_webhook' });

  const order = await waitFor(async () => {
    const local = await env.store.queries.getOrder('refund-1');
    return local?.status === 'REFUNDED' ? local : undefined;
  });
  assert.equal(order.message, refunded.message);
  assert.equal(order.nextPollAt, null, 'settled again');
});

test('an early-poll request by invoice number stores an order placed elsewhere', async (t) => {
  const env = await reconcilerEnv(t);
  const elsewhere = await upstreamOrder(env, 'elsewhere-1', '0007');
  await startFor(env);

  await requestPoll(env, { invoiceNumber: elsewhere.invoice_number, reason: 'stale_webhook' });

  const order = await waitFor(async () => await env.store.queries.getOrder('elsewhere-1'));
  assert.equal(order.invoiceNumber, elsewhere.invoice_number);
  assert.equal(order.status, 'PENDING');
});

test('an early-poll request that meets a spent poll share waits for a slot instead of failing', async (t) => {
  const env = await reconcilerEnv(t, {
    budget: { limit: 3, reservedForCreate: 1, windowMs: 1500, marginMs: 0 },
    // Not due during the test: the reconciler's first pass (BullMQ runs a new scheduler's first
    // job at once) must not take a poll slot before the test spends the share itself.
    settings: { firstPollDelayMs: 3_600_000 },
  });
  const created = await upstreamOrder(env, 'later-1', '0003');
  await env.store.writer.applyOrderSnapshot(created, { source: 'create' });
  await waitFor(async () => (await env.sim.allOrders())[0]?.serial_number);
  await startFor(env);
  assert.ok(await env.budget.tryAcquire('poll'));
  assert.ok(await env.budget.tryAcquire('poll'));
  assert.equal(await env.budget.tryAcquire('poll'), false, 'the poll share is spent');

  await requestPoll(env, { partnerRef: 'later-1', reason: 'stale_webhook' });

  await waitFor(async () => (await env.store.queries.getOrder('later-1'))?.serialNumber, {
    message: 'the poll after the window freed',
  });
  const queue = new Queue(POLL_REQUEST_QUEUE, { connection: { url: env.redis.url } });
  env.defer(() => queue.close());
  assert.equal(await queue.getFailedCount(), 0);
});

test('a 429 tells the early poll when to try again: its Retry-After, or when the rate window can have room', () => {
  const refused = (retryAfterMs?: number) =>
    new UpstreamError({
      status: 429,
      code: 'TOO_MANY_REQUESTS',
      detail: '',
      method: 'GET',
      path: '/v1/member-api/orders/R',
      attempts: 1,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    });
  assert.deepEqual(classifyFailure(refused(42_000)), {
    reason: 'rate_limited',
    calls: 1,
    retryAfterMs: 42_000,
  });
  assert.deepEqual(classifyFailure(refused()), { reason: 'rate_limited', calls: 1 });
});
