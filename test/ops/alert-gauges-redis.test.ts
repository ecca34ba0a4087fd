import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { createWebhookProducer } from '../../src/queue/webhook-producer.js';
import { registerBudgetGauges } from '../../src/rate-budget/budget-metrics.js';
import { RateBudget } from '../../src/rate-budget/rate-budget.js';
import { createReceiverMetrics } from '../../src/receiver/metrics.js';
import { scraped } from '../helpers/metrics.js';
import { privateRedis } from '../helpers/redis.js';
import { cleanupScope } from '../helpers/worker.js';

/** The gauges the alerting rules (deploy/prometheus/) read from Redis at each scrape. */

test('h2h_redis_up is 1 while Redis answers the receiver’s scrape and 0 once it is gone', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const producer = createWebhookProducer({ redisUrl: redis.url });
  t.after(() => producer.close());
  await producer.ping();
  const { registry } = createReceiverMetrics(producer);
  assert.equal(await scraped(registry, 'h2h_redis_up'), 1);
  assert.equal(await scraped(registry, 'h2h_queue_jobs', { queue: 'h2h-webhooks', state: 'waiting' }), 0);
  await redis.stop();
  assert.equal(await scraped(registry, 'h2h_redis_up'), 0);
  assert.equal(
    await scraped(registry, 'h2h_queue_jobs', { queue: 'h2h-webhooks', state: 'waiting' }),
    undefined,
  );
});

test('the budget gauges show the shared window’s grants by priority, its limit and poll ceiling, and polls refused', async (test) => {
  const t = cleanupScope(test);
  const server = await privateRedis(t);
  const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
  redis.on('error', () => {}); // refused once the server is stopped, as the test means it to be
  t.after(() => redis.disconnect());
  const budget = new RateBudget({
    redis,
    apiKey: 'alert-gauges',
    limit: 10,
    reservedForCreate: 4,
    pollFloor: 0,
  });
  const registry = new Registry();
  registerBudgetGauges(registry, [{ upstream: 'default', budget }]);
  const value = (name: string, labels: Record<string, string> = {}) =>
    scraped(registry, name, { upstream: 'default', ...labels });

  assert.equal(await value('h2h_rate_budget_limit'), 10);
  assert.equal(await value('h2h_rate_budget_poll_ceiling'), 6);
  assert.equal(await value('h2h_rate_budget_polls_waiting'), 0);
  for (let i = 0; i < 3; i++) assert.ok(await budget.tryAcquire('create'));
  for (let i = 0; i < 3; i++) assert.ok(await budget.tryAcquire('poll'));
  assert.equal(await value('h2h_rate_budget_used', { priority: 'create' }), 3);
  assert.equal(await value('h2h_rate_budget_used', { priority: 'poll' }), 3);
  assert.equal(await value('h2h_rate_budget_used', { priority: 'audit' }), 0);
  // The poll share (6) is spent: the next poll is refused, and due orders wait for slots.
  assert.equal(await budget.tryAcquire('poll'), false);
  assert.equal(await value('h2h_rate_budget_polls_waiting'), 1);

  await server.stop();
  assert.equal(await value('h2h_rate_budget_limit'), undefined, 'no figures while Redis does not answer');
});
