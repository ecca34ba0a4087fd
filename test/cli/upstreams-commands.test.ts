import assert from 'node:assert/strict';
import { test } from 'node:test';
import { learnPace } from '../../src/reconciler/learn-pace.js';
import { withClaims } from '../../src/store/order-store.js';
import { runCli } from '../helpers/cli.js';
import { publicFormBreaches } from '../helpers/public-json.js';
import { testSettings } from '../helpers/reconciler.js';
import { privateRedis } from '../helpers/redis.js';
import { planFirstPolls, snapshot, tempStore } from '../helpers/store.js';
import { type TwoUpstreams, twoSimulatedUpstreams } from '../helpers/upstreams.js';

/** Two simulated upstreams, a private Redis and a store whose first polls are due at once. */
async function cliOnTwoUpstreams(t: Parameters<typeof privateRedis>[0]) {
  const redis = await privateRedis(t);
  const upstreams = await twoSimulatedUpstreams(t);
  const settings = testSettings({ firstPollDelayMs: 0 });
  const { store, path } = await tempStore(t, { ...settings, now: Date.now });
  await planFirstPolls(store, 'beta');
  const cli = (args: string[]) => runCli(args, { ...upstreams.env, REDIS_URL: redis.url, H2H_DB_PATH: path });
  return { upstreams, settings, store, cli };
}

/** An order placed on `upstream` and stored as its webhook told it (its later webhooks lost). */
async function orderOn(
  env: { upstreams: TwoUpstreams; store: Awaited<ReturnType<typeof tempStore>>['store'] },
  upstream: 'default' | 'beta',
  ref: string,
) {
  const placed = await env.upstreams.createOrder(upstream, ref, '0007'); // stays PENDING
  await env.store.writer.applyOrderSnapshot(placed, {
    source: 'webhook',
    eventId: `${upstream}/${ref}`,
    upstream,
  });
}

test("status shows each upstream's circuit, budget and due orders; reconcile --upstream polls that upstream's orders on it", async (t) => {
  const env = await cliOnTwoUpstreams(t);
  const { upstreams, store, cli } = env;
  await orderOn(env, 'default', 'default-1');
  await orderOn(env, 'beta', 'beta-1');
  await orderOn(env, 'beta', 'beta-2');
  await withClaims(store, env.settings, 'beta').circuit.probeFailed('upstream_failing', {
    code: 'SERVICE_UNAVAILABLE',
    message: 'beta answers 503 for every order',
  });

  const json = await cli(['status', '--json']);
  assert.equal(json.code, 0, json.stderr);
  const report = JSON.parse(json.stdout);
  assert.deepEqual(publicFormBreaches(report), []);
  assert.deepEqual(
    report.upstreams.map((u: { name: string; circuit: { cause: string } | null; orders: unknown }) => [
      u.name,
      u.circuit?.cause ?? null,
      u.orders,
    ]),
    [
      ['default', null, { open: 1, due_for_poll: 1, stuck: 0, blocked: 0 }],
      ['beta', 'upstream_failing', { open: 2, due_for_poll: 2, stuck: 0, blocked: 0 }],
    ],
  );
  assert.deepEqual(
    report.upstreams.map((u: { budget: { limit: number } }) => u.budget.limit),
    [60, 60],
  );
  assert.deepEqual(report.upstreams[1].reconcile_queue, { waiting: 0, active: 0, delayed: 0, failed: 0 });
  assert.equal(report.circuit, null, "the top-level circuit is the default's");
  const table = await cli(['status']);
  assert.match(table.stdout, /Upstreams:/);
  assert.match(table.stdout, /│ h2h-reconcile-beta +│ 0 +│/);
  assert.match(table.stdout, /│ beta +│ OPEN \(upstream_failing\) │ 0\/60 in the last \d+ s/);
  assert.match(table.stdout, /Reconciler circuit of upstream beta OPEN \(upstream_failing\)/);

  await withClaims(store, env.settings, 'beta').circuit.close();
  const pass = await cli(['reconcile', '--once', '--upstream', 'beta', '--json']);
  assert.equal(pass.code, 0, pass.stderr);
  assert.equal(JSON.parse(pass.stdout).checked, 2);
  assert.deepEqual(upstreams.logs.beta.gets().sort(), ['beta-1', 'beta-2']);
  assert.deepEqual(upstreams.logs.default.gets(), [], 'the default upstream is asked nothing');
  assert.equal((await store.queries.getOrder('default-1'))?.pollCount, 0);

  const unknown = await cli(['reconcile', '--once', '--upstream', 'gamma']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /no upstream is named "gamma": the configured ones are default, beta/);
});

test("order show --refresh polls an order with its own upstream's client", async (t) => {
  const env = await cliOnTwoUpstreams(t);
  await orderOn(env, 'beta', 'beta-show');

  const shown = await env.cli(['order', 'show', 'beta-show', '--refresh', '--json']);

  assert.equal(shown.code, 0, shown.stderr);
  assert.equal(JSON.parse(shown.stdout).refresh.result, 'polled');
  assert.deepEqual(env.upstreams.logs.beta.gets(), ['beta-show']);
  assert.deepEqual(env.upstreams.logs.default.gets(), []);
});

test("status shows each upstream's first-poll plan: the pace its own reconciler learned of its own orders", async (t) => {
  const env = await cliOnTwoUpstreams(t);
  // One beta order that took 90 s to SUCCESS; beta's reconciler learns from a single sample.
  await env.store.writer.applyOrderSnapshot(
    snapshot('beta-done', 'SUCCESS', {
      created_at: '2026-11-01T00:00:00.000Z',
      success_at: '2026-11-01T00:01:30.000Z',
      serial_number: 'SN',
    }),
    { source: 'webhook', eventId: 'beta/done', upstream: 'beta' },
  );
  await learnPace(env.store.pollPlans, 'beta', { ...env.settings, paceMinSamples: 1 });

  const json = await env.cli(['status', '--json']);

  assert.equal(json.code, 0, json.stderr);
  const [defaultView, betaView] = JSON.parse(json.stdout).upstreams;
  assert.equal(defaultView.first_poll.learned, false);
  assert.equal(defaultView.first_poll.delay_s, 0);
  assert.equal(betaView.first_poll.learned, true);
  assert.equal(betaView.first_poll.samples, 1);
  assert.ok(
    betaView.first_poll.final_s >= 90 && betaView.first_poll.final_s <= 99,
    `${betaView.first_poll.final_s}`,
  );
  const table = await env.cli(['status']);
  assert.match(
    table.stdout,
    /First poll on default: 0 s after a change, fixed: fewer than 50 final webhooks/,
  );
  assert.match(table.stdout, /First poll on beta: learned, p90 of the time to a final state 1 min 3\d s/);
});
