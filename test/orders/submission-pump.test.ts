import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { startSubmissionPump } from '../../src/orders/submission-pump.js';
import { RateBudget } from '../../src/rate-budget/rate-budget.js';
import { type OrderStore, withClaims } from '../../src/store/order-store.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { privateRedis } from '../helpers/redis.js';
import { startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { tempStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope } from '../helpers/worker.js';

const MAX_AGE_MS = 3_600_000;

/**
 * A simulator, a store on a manual clock (the age of an order without waiting for it) and a
 * client; `pump(maxAgeMs)` starts the submission pump on them, stopped when the test ends.
 */
async function setup(test: TestContext) {
  const t = cleanupScope(test);
  const sim = await startSimulator(t);
  const { store, clock } = await tempStore(t);
  const client = new UpstreamClient({ baseUrl: sim.sim.baseUrl, apiKey: sim.member.api_key });
  t.after(() => client.close());
  const pump = (maxAgeMs: number) => {
    const started = startSubmissionPump({ store, client, idleMs: 20, maxAgeMs });
    t.after(() => started.stop());
    return started;
  };
  return { sim, store, clock, pump };
}

/** Queues order `ref` as the shop API does: one the simulator accepts and leaves PENDING. */
function queue(store: OrderStore, ref: string) {
  return store.writer.createLocalOrder({
    partnerRef: ref,
    productCode: 'MLBB-86',
    data: { user_id: userIdEndingIn('0007'), server_id: '2001' },
    queued: true,
  });
}

const submissionOf = async (store: OrderStore, ref: string) =>
  (await store.queries.getOrder(ref))?.submissionState;

const sentUpstream = async (sim: Awaited<ReturnType<typeof startSimulator>>) =>
  (await sim.allOrders()).map((o) => o.partner_ref).sort();

test('with a maximum age, the pump cancels the queued and blocked orders older than it as EXPIRED and never sends them; a younger one is sent, a blocked one in doubt stays', async (t) => {
  const { sim, store, clock, pump } = await setup(t);
  await queue(store, 'old-queued');
  await queue(store, 'old-blocked');
  await store.writer.markBlocked('old-blocked', 'INVALID_API_KEY', 'the key was refused');
  await queue(store, 'old-in-doubt');
  await store.writer.markBlocked('old-in-doubt', 'INVALID_API_KEY', 'refused after a time-out', {
    inDoubt: true,
  });
  clock.advance(MAX_AGE_MS + 1);
  await queue(store, 'young');

  const running = pump(MAX_AGE_MS);
  await waitFor(async () => (await submissionOf(store, 'young')) === 'accepted', {
    message: 'the young order accepted upstream',
  });
  // The pump sweeps before it claims: the old orders were settled before the young one was sent.
  for (const ref of ['old-queued', 'old-blocked']) {
    const order = await store.queries.getPublicOrder(ref);
    assert.equal(order?.submission, 'cancelled', ref);
    assert.equal(order?.outcome, 'cancelled', ref);
    assert.equal(order?.cancellation?.code, 'EXPIRED', ref);
    assert.match(order?.cancellation?.detail ?? '', /not sent within 3600 s .*API_SUBMISSION_MAX_AGE_S/, ref);
  }
  assert.equal(
    await submissionOf(store, 'old-in-doubt'),
    'blocked',
    'it may exist upstream: never cancelled',
  );
  assert.deepEqual(await sentUpstream(sim), ['young']);
  assert.deepEqual(running.sent, { accepted: 1, rejected: 0, blocked: 0, unknown: 0 });
});

test('an order that grows too old between two sweeps is not sent: the pump’s claim passes over it, and the next sweep cancels it', async (t) => {
  const { sim, store, clock, pump } = await setup(t);
  await queue(store, 'ancient');
  clock.advance(2_000);
  await queue(store, 'aging');
  clock.advance(MAX_AGE_MS - 1_000);
  // The reconciler's circuit is open: the pump sweeps but sends nothing.
  await store.circuit.open('unauthorized', { code: 'INVALID_API_KEY', message: 'the key was refused' });
  pump(MAX_AGE_MS);
  await waitFor(async () => (await submissionOf(store, 'ancient')) === 'cancelled', {
    message: 'the first sweep to expire the ancient order',
  });
  assert.equal(await submissionOf(store, 'aging'), 'queued', 'young enough at that sweep');

  // Too old now, a second before the next sweep is due.
  clock.advance(4_000);
  await queue(store, 'young');
  await store.circuit.close();
  await waitFor(async () => (await submissionOf(store, 'young')) === 'accepted', {
    message: 'the order queued after it accepted upstream',
  });
  assert.equal(await submissionOf(store, 'aging'), 'queued', 'passed over, not sent');
  assert.deepEqual(await sentUpstream(sim), ['young']);

  clock.advance(1_000);
  await waitFor(async () => (await submissionOf(store, 'aging')) === 'cancelled', {
    message: 'the next sweep to expire it',
  });
  assert.equal((await store.queries.getOrder('aging'))?.cancelCode, 'EXPIRED');
  assert.deepEqual(await sentUpstream(sim), ['young']);
});

test("another upstream's open circuit does not stop the pump: each upstream's circuit stops only what calls it", async (t) => {
  const { sim, store, pump } = await setup(t);
  const beta = withClaims(store, store.claims.settings, 'beta');
  await beta.circuit.open('unauthorized', { code: 'INVALID_API_KEY', message: 'beta refused the key' });
  await queue(store, 'while-beta-is-down');

  pump(MAX_AGE_MS);

  await waitFor(async () => (await submissionOf(store, 'while-beta-is-down')) === 'accepted', {
    message: "the default upstream's order sent while beta's circuit is open",
  });
  assert.deepEqual(await sentUpstream(sim), ['while-beta-is-down']);
  assert.equal((await beta.circuit.state())?.code, 'INVALID_API_KEY');
});

test('a maximum age of 0 expires nothing: an order queued a day ago is sent, a blocked one stays blocked', async (t) => {
  const { sim, store, clock, pump } = await setup(t);
  await queue(store, 'blocked');
  await store.writer.markBlocked('blocked', 'INVALID_API_KEY', 'the key was refused');
  await queue(store, 'yesterday');
  clock.advance(86_400_000);

  const running = pump(0);
  await waitFor(async () => (await submissionOf(store, 'yesterday')) === 'accepted', {
    message: 'the day-old order accepted upstream',
  });
  assert.equal(await submissionOf(store, 'blocked'), 'blocked');
  assert.deepEqual(await sentUpstream(sim), ['yesterday']);
  assert.deepEqual(running.sent, { accepted: 1, rejected: 0, blocked: 0, unknown: 0 });
  assert.deepEqual(
    (await store.feed.after(0, 100)).map((e) => e.type),
    ['order.blocked', 'order.submitted'],
    'no order.cancelled',
  );
});

test('a queued order whose create may have reached the upstream before its pump died is sent again with its partner_ref however old: answered with the upstream’s order, never cancelled, never left queued', async (t) => {
  const { sim, store, clock, pump } = await setup(t);
  await queue(store, 'crashed');
  // A pump claimed it, marked its create sent, and died before the answer came back; the create
  // had reached the upstream.
  const claim = await store.claims.claimNextQueued();
  assert.ok(
    await store.writer.startSubmission('crashed', claim!.claim, { leaseMs: store.claims.settings.leaseMs }),
  );
  const upstream = await sim.createOrder({
    partner_ref: 'crashed',
    product_code: 'MLBB-86',
    data: { user_id: userIdEndingIn('0007'), server_id: '2001' },
  });
  assert.equal(upstream.status, 201);
  clock.advance(MAX_AGE_MS + 1);
  await queue(store, 'young');

  pump(MAX_AGE_MS);
  await waitFor(async () => (await submissionOf(store, 'young')) === 'accepted', {
    message: 'the order queued after it accepted upstream',
  });
  // Claimed in arrival order: the older order's turn came first.
  const crashed = await store.queries.getOrder('crashed');
  assert.equal(crashed?.submissionState, 'accepted');
  assert.equal(crashed?.invoiceNumber, upstream.body.invoice_number);
  assert.deepEqual(await sentUpstream(sim), ['crashed', 'young'], 'one order each');
});

test('an order whose create never got a budget slot was not sent: it stays queued, nothing in doubt, and the shop can still cancel it', async (test) => {
  const t = cleanupScope(test);
  const sim = await startSimulator(t);
  const redis = await privateRedis(t);
  const { store } = await tempStore(t, { now: Date.now });
  const connection = new Redis(redis.url);
  t.after(() => connection.quit());
  // A budget of one call a minute, spent: no create slot within the client's wait.
  const budget = new RateBudget({ redis: connection, apiKey: sim.member.api_key, limit: 1 });
  await budget.acquire('create');
  const client = new UpstreamClient({
    baseUrl: sim.sim.baseUrl,
    apiKey: sim.member.api_key,
    budget,
    budgetMaxWaitMs: 50,
  });
  t.after(() => client.close());
  await queue(store, 'starved');
  const running = startSubmissionPump({ store, client, idleMs: 20 });
  t.after(() => running.stop());

  await waitFor(() => running.sent.unknown >= 2, { message: 'the pump to try the order twice' });
  const order = await store.queries.getOrder('starved');
  assert.deepEqual(
    [order?.submissionState, order?.firstSentAt, order?.createInDoubtAt],
    ['queued', null, null],
  );
  await running.stop();
  assert.equal(
    (await store.writer.cancelOrder('starved', { code: 'CANCELLED', detail: 'test' })).cancelled,
    true,
  );
  assert.deepEqual(await sentUpstream(sim), [], 'never sent');
});
