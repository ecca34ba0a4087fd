import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type CandidateFacts, routeOrder } from '../../src/routing/route-order.js';

/** A candidate that can take the order now, with `overrides`. */
function candidate(upstream: string, overrides: Partial<CandidateFacts> = {}): CandidateFacts {
  return {
    upstream,
    product_code: 'ML86',
    price: 15_000,
    isActive: true,
    priority: 0,
    circuitOpen: null,
    balance: 1_000_000,
    completionMs: 60_000,
    queueWaitMs: 0,
    ...overrides,
  };
}

const LIMITS = { maxQueueWaitMs: 30_000 };
const order = (decision: ReturnType<typeof routeOrder>) =>
  decision.ok ? [decision.first.upstream, ...decision.route.next.map((c) => c.upstream)] : decision.skipped;

test('cheapest orders the candidates by price, priority by the configured order, fastest by completion time', () => {
  const candidates = [
    candidate('a', { price: 15_000, priority: 0, completionMs: 90_000 }),
    candidate('b', { price: 14_000, priority: 2, completionMs: null }),
    candidate('c', { price: 16_000, priority: 1, completionMs: 30_000 }),
  ];
  assert.deepEqual(order(routeOrder(candidates, 'cheapest', LIMITS)), ['b', 'a', 'c']);
  assert.deepEqual(order(routeOrder(candidates, 'priority', LIMITS)), ['a', 'c', 'b']);
  // A completion time not learned yet counts as the slowest.
  assert.deepEqual(order(routeOrder(candidates, 'fastest', LIMITS)), ['c', 'a', 'b']);
  const cheapest = routeOrder(candidates, 'cheapest', LIMITS);
  assert.ok(cheapest.ok);
  assert.match(cheapest.route.reason, /^cheapest: price 14000 on b/);
});

test('an inactive product, an open circuit, a balance below the price or a long queue is passed over, with why', () => {
  const decision = routeOrder(
    [
      candidate('inactive', { price: 1, isActive: false }),
      candidate('open', { price: 2, circuitOpen: 'INVALID_API_KEY' }),
      candidate('poor', { price: 3_000, balance: 2_999 }),
      candidate('busy', { price: 4, queueWaitMs: 31_000 }),
      candidate('ok', { price: 5 }),
    ],
    'cheapest',
    LIMITS,
  );
  assert.ok(decision.ok);
  assert.equal(decision.first.upstream, 'ok');
  assert.deepEqual(decision.route.next, []);
  assert.deepEqual(
    decision.route.skipped?.map((s) => [s.upstream, s.why]),
    [
      ['inactive', 'product inactive'],
      ['open', 'circuit open (INVALID_API_KEY)'],
      ['poor', 'balance 2999 below the price 3000'],
      ['busy', 'its queue waits about 31 s for its budget'],
    ],
  );
});

test('when every queue is long, the shortest wait goes first, so a rush uses every budget', () => {
  const decision = routeOrder(
    [
      candidate('cheap', { price: 1, queueWaitMs: 90_000 }),
      candidate('mid', { price: 2, queueWaitMs: 40_000 }),
      candidate('dear', { price: 3, queueWaitMs: 60_000 }),
    ],
    'cheapest',
    LIMITS,
  );
  assert.deepEqual(order(decision), ['mid', 'dear', 'cheap']);
});

test('no candidate available: each one’s reason, and nothing chosen', () => {
  const decision = routeOrder(
    [candidate('a', { circuitOpen: 'SERVICE_UNAVAILABLE' }), candidate('b', { isActive: false })],
    'cheapest',
    LIMITS,
  );
  assert.deepEqual(decision, {
    ok: false,
    skipped: [
      { upstream: 'a', why: 'circuit open (SERVICE_UNAVAILABLE)' },
      { upstream: 'b', why: 'product inactive' },
    ],
  });
});
