import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { startSubmissionPump } from '../../src/orders/submission-pump.js';
import { RateBudget, type RateBudgetOptions } from '../../src/rate-budget/rate-budget.js';
import type { ClaimingStore } from '../../src/store/order-store.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { privateRedis } from '../helpers/redis.js';
import { startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { everyOrder } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope } from '../helpers/worker.js';

/** A claim's lease here: every create below waits longer than this for its budget slot. */
const LEASE_MS = 1_500;
/** One create per 2 s window: with two pumps each create waits 2–4 s for its slot. */
const BUDGET = { limit: 1, windowMs: 2_000, marginMs: 0 } satisfies Partial<RateBudgetOptions>;

describeEachBackend('the submission pump', (backend) => {
  test('two pumps on one store whose creates each wait longer than a lease for a budget slot send every queued order exactly once', async (t) => {
    const scope = cleanupScope(t);
    const sim = await startSimulator(scope);
    const redis = await privateRedis(scope);
    const { store, url } = await backend.tempStore(scope, { now: Date.now, leaseMs: LEASE_MS });
    const other = await backend.open(scope, url, { now: Date.now, leaseMs: LEASE_MS });
    /** One process's upstream: its own Redis connection, budget and client on the shared budget. */
    const processUpstream = () => {
      const connection = new Redis(redis.url);
      scope.after(() => connection.quit());
      const budget = new RateBudget({ redis: connection, apiKey: sim.member.api_key, ...BUDGET });
      const client = new UpstreamClient({
        baseUrl: sim.sim.baseUrl,
        apiKey: sim.member.api_key,
        budget,
        budgetMaxWaitMs: 60_000,
      });
      scope.after(() => client.close());
      return { budget, client };
    };
    const refs = ['P-1', 'P-2', 'P-3', 'P-4', 'P-5'];
    for (const partnerRef of refs) {
      await store.writer.createLocalOrder({
        partnerRef,
        productCode: 'MLBB-86',
        data: { user_id: userIdEndingIn('0007'), server_id: '2001' },
        queued: true,
      });
    }

    // The window is full when the pumps start: the first creates wait for it too.
    await processUpstream().budget.acquire('create');
    const startedAt = Date.now();
    const pumps = ([store, other] as ClaimingStore[]).map((s) =>
      startSubmissionPump({ store: s, client: processUpstream().client, idleMs: 20 }),
    );
    for (const pump of pumps) scope.after(() => pump.stop());

    await waitFor(() => everyOrder(store, refs, (order) => order.submissionState === 'accepted'), {
      timeoutMs: 60_000,
      message: 'every queued order accepted',
    });
    assert.deepEqual(
      await sim.createRequests(refs),
      Object.fromEntries(refs.map((ref) => [ref, 1])),
      'each order was sent once',
    );
    // Each create went out under its first claim: none was stopped for a claim that ran out.
    const sent = await waitFor(
      () => {
        const total = pumps.reduce((sum, pump) => sum + pump.sent.accepted + pump.sent.unknown, 0);
        return total >= refs.length ? pumps.map((pump) => ({ ...pump.sent })) : undefined;
      },
      { message: 'the pumps to count their sends' },
    );
    assert.deepEqual(
      sent.map((s) => s.unknown),
      [0, 0],
      `no create stopped by a lost claim: ${JSON.stringify(sent)}`,
    );
    assert.ok(
      sent.every((s) => s.accepted > 0),
      `both pumps sent orders: ${JSON.stringify(sent)}`,
    );
    // Both pumps claimed an order at once and waited for the full window under that claim: the
    // first create reached the upstream more than a lease after they started.
    const firstArrival = Math.min(...(await sim.allOrders()).map((o) => Date.parse(o.created_at)));
    assert.ok(
      firstArrival - startedAt > LEASE_MS,
      `the first create waited ${firstArrival - startedAt} ms, more than a lease`,
    );
  });
});
