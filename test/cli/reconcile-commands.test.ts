import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createProgressLine } from '../../src/cli/progress.js';
import { RECONCILE_PASS_LOCK_KEY } from '../../src/reconciler/reconcile-queue.js';
import { RedisLease } from '../../src/shared/redis-lease.js';
import { runCli } from '../helpers/cli.js';
import { ISO_UTC, publicFormBreaches } from '../helpers/public-json.js';
import { createUpstreamOrder, type ReconcilerEnv, reconcilerEnv } from '../helpers/reconciler.js';

/** Runs the CLI as a user would, in a child process, against the test's simulator, Redis and store. */
function cli(env: ReconcilerEnv, args: string[], extraEnv: Record<string, string> = {}) {
  return runCli(args, {
    H2H_BASE_URL: env.sim.sim.baseUrl,
    H2H_API_KEY: env.sim.member.api_key,
    REDIS_URL: env.redis.url,
    H2H_DB_PATH: env.dbPath,
    ...extraEnv,
  });
}

test('reconcile --once runs one pass now and prints its summary; status shows orders, due polls and queues', async (t) => {
  // First polls due at once, so the CLI's pass has work; all webhooks lost.
  const env = await reconcilerEnv(t, { sim: { timeScale: 0.001 }, settings: { firstPollDelayMs: 0 } });
  await env.sim.setFaults({ webhook_drop: 1 });
  for (const [ref, suffix] of [
    ['cli-1', '0001'],
    ['cli-2', '0002'],
    ['cli-3', '0007'],
  ] as const) {
    await createUpstreamOrder(env, ref, suffix);
  }
  const before = await cli(env, ['status', '--json']);
  assert.equal(before.code, 0, before.stderr);
  const statusBefore = JSON.parse(before.stdout);
  assert.equal(statusBefore.orders.due_for_poll, 3);
  assert.deepEqual(statusBefore.orders.by_status, { PENDING: 3 });
  assert.deepEqual(statusBefore.queues.reconcile, { waiting: 0, active: 0, delayed: 0, failed: 0 });
  assert.equal(statusBefore.failed_events, 0);
  assert.deepEqual(statusBefore.audit, {
    window_days: 7,
    success_orders: 0,
    checked_last_day: 0,
    coverage: null,
  });
  // The plan the store's reconciler wrote (its first-poll delay 0 here), not this CLI's setting.
  assert.deepEqual(statusBefore.first_poll, {
    learned: false,
    delay_s: 0,
    reason: 'fewer than 50 final webhooks known yet (RECONCILE_PACE_MIN_SAMPLES)',
  });

  const pass = await cli(env, ['reconcile', '--once', '--json']);
  assert.equal(pass.code, 0, pass.stderr);
  const summary = JSON.parse(pass.stdout);
  assert.deepEqual(
    [summary.checked, summary.changed, summary.still_open, summary.errors, summary.stopped_by],
    [3, 2, 1, 0, 'done'],
  );
  assert.equal(summary.budget.poll, 3);
  assert.match(summary.started_at, ISO_UTC);
  assert.match(summary.finished_at, ISO_UTC);
  assert.equal(pass.stderr, '', 'no progress line when stderr is not a terminal');
  assert.equal((await env.store.queries.getOrder('cli-1'))!.status, 'SUCCESS');
  assert.equal((await env.store.queries.getOrder('cli-2'))!.status, 'FAILED');

  const table = await cli(env, ['reconcile', '--once']);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /Checked.*Changed.*Still open.*Stuck.*Errors.*Audited.*Budget used/);
  assert.match(table.stdout, /no order left due/);

  const after = await cli(env, ['status']);
  assert.equal(after.code, 0, after.stderr);
  assert.match(after.stdout, /│ FAILED +│ 1 +│/);
  assert.match(after.stdout, /│ SUCCESS +│ 1 +│/);
  assert.match(after.stdout, /h2h-reconcile/);
  assert.match(after.stdout, /Failed events: 0/);
  assert.match(
    after.stdout,
    /Audit of SUCCESS orders \(last 7 d, on idle budget\): 1 of 1 checked in the last day \(100 %\)/,
  );
  assert.match(after.stdout, /First poll: 30 s after a change, fixed: fewer than 50 final webhooks/);

  // A pass learns the pace from what the store recorded: here the SUCCESS the first pass found,
  // by its success_at, once one sample is enough.
  const relearn = await cli(env, ['reconcile', '--once'], { RECONCILE_PACE_MIN_SAMPLES: '1' });
  assert.equal(relearn.code, 0, relearn.stderr);
  const learned = await cli(env, ['status', '--json']);
  assert.equal(learned.code, 0, learned.stderr);
  const { first_poll: firstPoll } = JSON.parse(learned.stdout);
  const order = (await env.store.queries.getOrder('cli-1'))!;
  const took = (Date.parse(order.successAt!) - Date.parse(order.createdAt!)) / 1000;
  assert.equal(firstPoll.learned, true);
  assert.equal(firstPoll.samples, 1);
  assert.ok(
    firstPoll.final_s >= took && firstPoll.final_s <= took * 1.1 + 0.001,
    `${firstPoll.final_s} s for ${took} s`,
  );
});

test('reconcile --once says so and exits 1 when another pass holds the lock, and 2 when the upstream refuses the key; status shows the open circuit and its fix', async (t) => {
  const env = await reconcilerEnv(t, { settings: { firstPollDelayMs: 0 } });
  await createUpstreamOrder(env, 'busy-1');
  const held = await new RedisLease(env.redisClient, { key: RECONCILE_PASS_LOCK_KEY }).acquire();
  assert.ok(held);
  const locked = await cli(env, ['reconcile', '--once']);
  assert.equal(locked.code, 1);
  assert.match(locked.stderr, /another reconciliation pass is running/);
  await held.release();

  const refused = await cli(env, ['reconcile', '--once', '--json'], { H2H_API_KEY: 'sim_key_noh2h_M0003' });
  assert.equal(refused.code, 2, 'a configuration problem');
  const summary = JSON.parse(refused.stdout);
  assert.equal(summary.stopped_by, 'unauthorized');
  assert.equal(summary.error.code, 'INVALID_API_KEY');
  assert.match(summary.circuit.opened_at, ISO_UTC);
  assert.deepEqual(publicFormBreaches(summary), []);
  assert.equal((await env.store.queries.getOrder('busy-1'))!.lastPolledAt, null, 'the order keeps its place');

  const status = await cli(env, ['status']);
  assert.equal(status.code, 0, status.stderr);
  assert.match(
    status.stdout,
    /Reconciler circuit OPEN \(unauthorized\) for .*INVALID_API_KEY: check the API key \(H2H_API_KEY\)/,
  );
  const json = JSON.parse((await cli(env, ['status', '--json'])).stdout);
  assert.deepEqual([json.circuit.cause, json.circuit.code], ['unauthorized', 'INVALID_API_KEY']);

  const table = await cli(env, ['reconcile', '--once']);
  assert.equal(table.code, 0, 'the right key: the probe closes the circuit and the pass polls');
  assert.match(table.stdout, /no order left due/);
  assert.equal(JSON.parse((await cli(env, ['status', '--json'])).stdout).circuit, null);
});

test('order show --refresh polls the order now and shows what the upstream says', async (t) => {
  const env = await reconcilerEnv(t);
  await env.sim.setFaults({ webhook_drop: 1 });
  await createUpstreamOrder(env, 'show-1', '0007');
  await env.sim.setStatus('show-1', { status: 'SUCCESS', serial_number: 'SN-SHOW' });

  const stored = await cli(env, ['order', 'show', 'show-1', '--json']);
  assert.equal(JSON.parse(stored.stdout).order.status, 'PENDING', 'without --refresh: the store only');

  const refreshed = await cli(env, ['order', 'show', 'show-1', '--refresh', '--json']);
  assert.equal(refreshed.code, 0, refreshed.stderr);
  const shown = JSON.parse(refreshed.stdout);
  assert.deepEqual(shown.refresh, {
    result: 'polled',
    refreshed: true,
    changed: true,
    note: 'refreshed: the upstream had news (a webhook was lost or late)',
  });
  assert.equal(shown.order.status, 'SUCCESS');
  assert.equal(shown.order.serial_number, 'SN-SHOW');
  assert.equal(shown.events.at(-1).source, 'poll');

  const table = await cli(env, ['order', 'show', 'show-1', '--refresh']);
  assert.match(table.stdout, /refreshed: no change/);

  const unknown = await cli(env, ['order', 'show', 'nobody-1', '--refresh']);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /no local order .* and the upstream has none either/);
});

test('the progress line draws a bar on a terminal, clears itself at the end, and writes nothing elsewhere', () => {
  const written: string[] = [];
  const stream = (isTTY: boolean) =>
    Object.assign(
      new Writable({
        write(chunk, _encoding, done) {
          written.push(chunk.toString());
          done();
        },
      }),
      { isTTY },
    ) as unknown as NodeJS.WriteStream;

  const line = createProgressLine(stream(true), { width: 10, minIntervalMs: 0 });
  line.update(3, 10, 'checked 3');
  line.update(10, 10, 'checked 10');
  line.done();
  assert.deepEqual(written, [
    '\r[###-------] 3/10 checked 3\x1b[K',
    '\r[##########] 10/10 checked 10\x1b[K',
    '\r\x1b[K',
  ]);

  written.length = 0;
  const piped = createProgressLine(stream(false));
  piped.update(1, 2);
  piped.done();
  const disabled = createProgressLine(stream(true), { enabled: false });
  disabled.update(1, 2);
  assert.deepEqual(written, []);
});
