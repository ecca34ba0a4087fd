// Failover end to end on real parts: the shop API, a worker with a pump and a reconciler per
// upstream, two simulated upstreams over HTTP (`default` first by priority, `beta`), a private
// Redis and a SQLite file. Webhooks go nowhere: every order's news comes from create answers and
// polls.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startApi } from '../../src/api/server.js';
import { loadConfig } from '../../src/config/config.js';
import type { PublicOrder } from '../../src/domain/public-order.js';
import { UpstreamCircuit } from '../../src/store/upstream-circuit.js';
import type { Order } from '../../src/upstream/model.js';
import { startWorkerProcess } from '../../src/worker/server.js';
import { sendApi } from '../helpers/api.js';
import { privateRedis } from '../helpers/redis.js';
import { httpRequest, userIdEndingIn } from '../helpers/simulator.js';
import { openTestStore, scheduleSettings, tempDbPath } from '../helpers/store.js';
import { twoSimulatedUpstreams } from '../helpers/upstreams.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope } from '../helpers/worker.js';

type SimOrder = Order & { create_requests: number };

/** The shop API and a worker on two simulated upstreams, both catalogs synced. */
async function failoverStack(test: Parameters<typeof privateRedis>[0]) {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const upstreams = await twoSimulatedUpstreams(t);
  const dbPath = tempDbPath(t);
  const store = await openTestStore(dbPath, scheduleSettings());
  t.after(() => store.close());
  const config = loadConfig({
    REDIS_URL: redis.url,
    H2H_DB_PATH: dbPath,
    ...upstreams.env,
    H2H_ROUTING_POLICY: 'priority',
    RECONCILE_EVERY_S: '1',
    RECONCILE_FIRST_POLL_DELAY_S: '0',
    RECONCILE_BACKOFF_S: '1',
    H2H_RETRY_MAX_ATTEMPTS: '1',
    API_PORT: '0',
    API_HOST: '127.0.0.1',
  });
  const worker = await startWorkerProcess(config);
  t.after(() => worker.close());
  await waitFor(async () => (await store.catalog.candidates({ code: 'MLBB-86' })).length === 2, {
    message: 'both catalogs synced',
  });
  const api = await startApi(config);
  t.after(() => api.close());
  const { token } = await store.tokens.create('shop', ['orders:read', 'orders:write']);

  const place = async (ref: string, suffix: string) => {
    const answer = await sendApi(api.origin, token, 'POST', '/v1/orders', {
      partner_ref: ref,
      product_code: 'MLBB-86',
      data: { user_id: userIdEndingIn(suffix), server_id: '2001' },
    });
    assert.equal(answer.status, 202, JSON.stringify(answer.body));
  };
  const order = async (ref: string) =>
    (await sendApi(api.origin, token, 'GET', `/v1/orders/${ref}`)).body as PublicOrder;
  const orderOnce = (ref: string, done: (o: PublicOrder) => boolean, message: string) =>
    waitFor(
      async () => {
        const o = await order(ref);
        return done(o) ? o : undefined;
      },
      { message: `${ref}: ${message}`, timeoutMs: 20_000 },
    );
  /** Every order an upstream's simulator has whose partner_ref starts with `ref`. */
  const ordersOn = async (upstream: 'default' | 'beta', ref: string) =>
    (await httpRequest<SimOrder[]>(`${upstreams[upstream].origin}/__sim/orders`)).body.filter((o) =>
      o.partner_ref.startsWith(ref),
    );
  const control = (
    upstream: 'default' | 'beta',
    path: string,
    json: unknown,
    method: 'POST' | 'PATCH' = 'POST',
  ) => httpRequest(`${upstreams[upstream].origin}/__sim${path}`, { method, json });
  const attemptsOf = (o: PublicOrder) =>
    o.attempts.map((a) => [a.upstream, a.partner_ref, a.status ?? a.submission, a.ended?.code ?? null]);
  return { store, place, order, orderOnce, ordersOn, control, attemptsOf };
}

test('a create refused for INSUFFICIENT_BALANCE on the first upstream is placed once on the next', async (t) => {
  const s = await failoverStack(t);
  // The default upstream's balance is gone since its catalog refresh read it.
  await s.control('default', '/members/M-0001', { balance: 0 }, 'PATCH');

  await s.place('E1', '0003');
  const done = await s.orderOnce('E1', (o) => o.status === 'SUCCESS', 'SUCCESS');

  assert.deepEqual(s.attemptsOf(done), [
    ['default', 'E1', 'rejected', 'INSUFFICIENT_BALANCE'],
    ['beta', 'E1~2', 'SUCCESS', null],
  ]);
  assert.equal(done.partner_ref, 'E1');
  assert.equal(done.upstream, 'beta');
  assert.deepEqual(await s.ordersOn('default', 'E1'), []);
  assert.deepEqual(
    (await s.ordersOn('beta', 'E1')).map((o) => [o.partner_ref, o.create_requests, o.status]),
    [['E1~2', 1, 'SUCCESS']],
  );
});

test('a create with no answer is resolved on its own upstream first: nothing goes to the next until the first says FAILED', async (t) => {
  const s = await failoverStack(t);
  // The default upstream takes the create and loses every answer; the order stays PENDING there.
  await s.control('default', '/faults', { create_drop_response: 1 });

  await s.place('E2', '0007');
  // The reconciler reads it from the default upstream: the unknown outcome resolved there.
  const pending = await s.orderOnce('E2', (o) => o.status === 'PENDING', 'PENDING on default');
  assert.deepEqual(s.attemptsOf(pending), [['default', 'E2', 'PENDING', null]]);
  assert.deepEqual(await s.ordersOn('beta', 'E2'), [], 'no attempt on beta while default has it open');

  await s.control('default', '/orders/E2/status', { status: 'FAILED', message: 'provider down' });
  const moved = await s.orderOnce('E2', (o) => o.upstream === 'beta' && o.status === 'PENDING', 'on beta');

  assert.deepEqual(s.attemptsOf(moved), [
    ['default', 'E2', 'FAILED', 'FAILED'],
    ['beta', 'E2~2', 'PENDING', null],
  ]);
  assert.deepEqual(
    (await s.ordersOn('beta', 'E2')).map((o) => [o.partner_ref, o.create_requests]),
    [['E2~2', 1]],
  );
});

test('an order that ends FAILED goes on to the next upstream, and ends with every attempt when that one fails too', async (t) => {
  const s = await failoverStack(t);
  // 0004: PENDING → PROCESSING → FAILED on every upstream.
  await s.place('E3', '0004');
  const done = await s.orderOnce('E3', (o) => o.outcome !== null, 'final');

  assert.equal(done.outcome, 'failed');
  assert.deepEqual(s.attemptsOf(done), [
    ['default', 'E3', 'FAILED', 'FAILED'],
    ['beta', 'E3~2', 'FAILED', null],
  ]);
  for (const upstream of ['default', 'beta'] as const) {
    assert.deepEqual(
      (await s.ordersOn(upstream, 'E3')).map((o) => o.create_requests),
      [1],
      `one create on ${upstream}`,
    );
  }
  // Each failed attempt was credited back on its own upstream.
  for (const upstream of ['default', 'beta']) {
    const balance = await s.store.balance.viewOf(upstream);
    assert.equal(balance.debited, balance.credited, `${upstream}: debited and credited alike`);
  }
});

test('while the first upstream’s circuit is open, new orders go to the next at once', async (t) => {
  const s = await failoverStack(t);
  // The default upstream stops taking our key: the first order's create opens its circuit.
  await s.control('default', '/members/M-0001', { h2h_enabled: false }, 'PATCH');
  await s.place('E4', '0003');
  await waitFor(async () => (await new UpstreamCircuit(s.store.context, 'default').state()) !== null, {
    message: "default's circuit open",
  });

  await s.place('E5', '0003');
  const done = await s.orderOnce('E5', (o) => o.status === 'SUCCESS', 'SUCCESS');

  assert.deepEqual(s.attemptsOf(done), [['beta', 'E5', 'SUCCESS', null]]);
  assert.match(done.attempts[0]!.chosen ?? '', /beta/);
  assert.deepEqual(await s.ordersOn('default', 'E5'), []);
  // The first order waits on the default upstream, blocked: a refused key is no non-fulfilment.
  const blocked = await s.order('E4');
  assert.deepEqual(s.attemptsOf(blocked), [['default', 'E4', 'blocked', null]]);
});
