import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createSimulator } from '../../src/simulator/index.js';
import { RealisticProfile, resolveRealistic } from '../../src/simulator/profile.js';
import { DEFAULT_PROGRESSION, PROGRESSIONS } from '../../src/simulator/status-progression.js';
import { demoFixture, startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';

interface TimelineBody {
  stuck: boolean;
  steps: { status: string; with_serial: boolean; at_ms: number }[];
}

/** The empirical quantile q of `values` (nearest rank). */
function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

function assertNear(actual: number, expected: number, relative: number, what: string): void {
  assert.ok(
    Math.abs(actual - expected) <= relative * expected,
    `${what}: ${actual} is not within ${relative * 100} % of ${expected}`,
  );
}

describe('realistic profile: distributions', () => {
  // Fixed seeds: the draws are deterministic, so the tolerances are generous but never flaky.
  const DRAWS = 20_000;

  test('completion times and webhook delays have the configured median and p99', () => {
    const settings = resolveRealistic({
      completion: { median_s: 30, p99_s: 300 },
      webhook_delay: { median_s: 0.5, p99_s: 8 },
      stuck_share: 0,
    });
    const profile = new RealisticProfile(settings, 42);
    const completions: number[] = [];
    const delays: number[] = [];
    for (let i = 0; i < DRAWS; i++) {
      const { steps } = profile.timeline('MLBB-86', DEFAULT_PROGRESSION);
      completions.push(steps.at(-1)!.at_ms / 1000);
      delays.push(profile.webhookDelayMs() / 1000);
    }
    assertNear(quantile(completions, 0.5), 30, 0.05, 'completion median');
    assertNear(quantile(completions, 0.99), 300, 0.15, 'completion p99');
    assertNear(quantile(delays, 0.5), 0.5, 0.05, 'webhook delay median');
    assertNear(quantile(delays, 0.99), 8, 0.15, 'webhook delay p99');
  });

  test('a product of the fixture with its own completion distribution follows it, the others the fixture-wide one', async () => {
    const fixture = demoFixture() as unknown as Record<string, unknown> & {
      products: Record<string, unknown>[];
    };
    fixture.products.find((p) => p.code === 'FF-70')!.completion = { median_s: 600, p99_s: 3600 };
    fixture.realistic = { completion: { median_s: 10, p99_s: 60 }, stuck_share: 0 };
    const { loadFixture } = await import('../../src/simulator/fixture.js');
    const loaded = await loadFixture(fixture as never);
    const profile = new RealisticProfile(resolveRealistic(loaded.realistic), 3);
    const draw = (code: string) =>
      Array.from(
        { length: DRAWS / 2 },
        () => profile.timeline(code, DEFAULT_PROGRESSION).steps[0]!.at_ms / 1000,
      );
    const slow = draw('FF-70');
    const usual = draw('MLBB-86');
    assertNear(quantile(slow, 0.5), 600, 0.06, 'FF-70 median');
    assertNear(quantile(slow, 0.99), 3600, 0.2, 'FF-70 p99');
    assertNear(quantile(usual, 0.5), 10, 0.06, 'MLBB-86 median');
    assertNear(quantile(usual, 0.99), 60, 0.2, 'MLBB-86 p99');
  });

  test("an order's timeline does not depend on how many webhook delays were drawn before it", () => {
    const settings = resolveRealistic({ stuck_share: 0.1 });
    const quiet = new RealisticProfile(settings, 21);
    const busy = new RealisticProfile(settings, 21);
    for (let i = 0; i < 200; i++) {
      for (let j = 0; j < i % 4; j++) busy.webhookDelayMs();
      assert.deepEqual(
        busy.timeline('MLBB-86', DEFAULT_PROGRESSION),
        quiet.timeline('MLBB-86', DEFAULT_PROGRESSION),
      );
    }
  });

  test('the stuck share of orders goes PROCESSING at the completion time and completes only after the stuck duration', () => {
    const settings = resolveRealistic({
      completion: { median_s: 20, p99_s: 100 },
      stuck_share: 0.05,
      stuck_duration: { median_s: 7200, p99_s: 7200 },
    });
    const profile = new RealisticProfile(settings, 9);
    let stuck = 0;
    for (let i = 0; i < DRAWS; i++) {
      const timeline = profile.timeline('MLBB-86', PROGRESSIONS['0003']!);
      if (!timeline.stuck) continue;
      stuck += 1;
      const [processing, success] = timeline.steps;
      assert.equal(processing!.status, 'PROCESSING');
      assert.equal(success!.status, 'SUCCESS');
      assert.equal(success!.at_ms - processing!.at_ms, 7_200_000);
    }
    assertNear(stuck / DRAWS, 0.05, 0.1, 'stuck share');
  });
});

describe('realistic profile: through the simulator', () => {
  async function timelinesOf(seed: number, count: number): Promise<TimelineBody[]> {
    const sim = await createSimulator({
      fixture: demoFixture() as never,
      profile: 'realistic',
      seed,
      rateLimit: 0,
      realistic: { stuck_share: 0.2 },
    });
    try {
      const key = demoFixture().members[0]!.api_key;
      const timelines: TimelineBody[] = [];
      for (let i = 0; i < count; i++) {
        const created = await fetch(`${sim.baseUrl}/orders`, {
          method: 'POST',
          headers: { 'x-api-key': key, 'content-type': 'application/json' },
          body: JSON.stringify({
            product_code: i % 2 === 0 ? 'MLBB-86' : 'MLBB-172',
            partner_ref: `seeded-${i}`,
            data: { user_id: userIdEndingIn(i % 3 === 0 ? '0003' : '1234'), server_id: '2001' },
          }),
        });
        assert.equal(created.status, 201, await created.clone().text());
        const answer = await fetch(`${sim.origin}/__sim/orders/seeded-${i}/timeline`);
        assert.equal(answer.status, 200);
        const { stuck, steps } = (await answer.json()) as TimelineBody;
        timelines.push({ stuck, steps });
      }
      return timelines;
    } finally {
      await sim.close();
    }
  }

  test('two runs with the same seed draw identical timelines; another seed draws others', async () => {
    const first = await timelinesOf(11, 30);
    const second = await timelinesOf(11, 30);
    const other = await timelinesOf(12, 30);
    assert.deepEqual(second, first);
    assert.notDeepEqual(other, first);
    assert.ok(
      first.some((timeline) => timeline.stuck),
      'a share of 0.2 over 30 orders draws at least one stuck order',
    );
  });

  test('stuck orders stay PROCESSING while the others complete, and complete after the time-scaled stuck duration', async (t) => {
    const sink = await startWebhookSink(t, { secrets: ['sim_secret_demo_M0001'] });
    const timeScale = 0.001;
    const harness = await startSimulator(t, {
      webhookUrl: sink.url,
      profile: 'realistic',
      seed: 5,
      timeScale,
      realistic: {
        completion: { median_s: 20, p99_s: 60 },
        webhook_delay: { median_s: 0.1, p99_s: 1 },
        stuck_share: 0.3,
        stuck_duration: { median_s: 3_600, p99_s: 3_600 },
      },
    });
    const refs: string[] = [];
    for (let i = 0; i < 20; i++) {
      const created = await harness.createOrder({
        partner_ref: `stuck-${i}`,
        data: { user_id: userIdEndingIn('1234'), server_id: '2001' },
      });
      assert.equal(created.status, 201);
      refs.push(created.body.partner_ref);
    }
    const timelines = new Map<string, TimelineBody>();
    for (const ref of refs)
      timelines.set(ref, (await harness.control<TimelineBody>(`/orders/${ref}/timeline`)).body);
    const stuckRefs = refs.filter((ref) => timelines.get(ref)!.stuck);
    assert.ok(stuckRefs.length > 0 && stuckRefs.length < refs.length, `stuck: ${stuckRefs.length} of 20`);

    // Every order has left PENDING: the others are SUCCESS, the stuck ones PROCESSING.
    const settled = await waitFor(
      async () => {
        const orders = await harness.allOrders();
        return orders.every((order) => order.status !== 'PENDING') ? orders : null;
      },
      { message: 'every order out of PENDING' },
    );
    for (const order of settled) {
      const stuck = stuckRefs.includes(order.partner_ref);
      assert.equal(order.status, stuck ? 'PROCESSING' : 'SUCCESS', `${order.partner_ref} (stuck: ${stuck})`);
    }

    // A stuck order completes 3600 simulated s (3.6 real s) after it went PROCESSING.
    const ref = stuckRefs[0]!;
    const processing = await sink.waitForDeliveries(
      (d) => d.body?.data?.partner_ref === ref && d.body?.data?.status === 'PROCESSING',
    );
    const success = await sink.waitForDeliveries(
      (d) => d.body?.data?.partner_ref === ref && d.body?.data?.status === 'SUCCESS',
      1,
      { timeoutMs: 20_000 },
    );
    const heldMs =
      Date.parse(String(success[0]!.body?.created_at)) - Date.parse(String(processing[0]!.body?.created_at));
    assert.ok(heldMs >= 3_600_000 * timeScale - 5, `held PROCESSING for ${heldMs} ms`);
  });
});

describe('losing final webhooks', () => {
  test('webhook_drop_final loses the events that carry a final state and no other, and GET /__sim/stats counts them', async (t) => {
    const sink = await startWebhookSink(t, { secrets: ['sim_secret_demo_M0001'] });
    const harness = await startSimulator(t, { webhookUrl: sink.url, timeScale: 0.005 });
    await harness.setFaults({ webhook_drop_final: 1 });
    const refs: string[] = [];
    for (const suffix of ['0003', '0005', '0004']) {
      const created = await harness.createOrder({
        data: { user_id: userIdEndingIn(suffix), server_id: '2001' },
      });
      assert.equal(created.status, 201);
      refs.push(created.body.partner_ref);
    }
    // 0003: PROCESSING, SUCCESS+serial; 0005: SUCCESS without serial, SUCCESS+serial; 0004: PROCESSING, FAILED.
    const stats = await waitFor(
      async () => {
        const body = (await harness.control('/stats')).body;
        return body.webhooks.attempts === 6 && body.webhooks.in_flight === 0 ? body : null;
      },
      { message: 'six webhook attempts recorded' },
    );
    assert.equal(stats.webhooks.final_events_lost, 3);
    assert.equal(stats.webhooks.dropped, 3);
    assert.equal(stats.webhooks.delivered, 3);
    assert.deepEqual(
      sink.deliveries.map((d) => [d.body?.data?.status, d.body?.data?.serial_number === null]).sort(),
      [
        ['PROCESSING', true],
        ['PROCESSING', true],
        ['SUCCESS', true],
      ],
    );
    assert.deepEqual(stats.orders.by_status, { SUCCESS: 2, FAILED: 1 });
  });
});

describe('time scale', () => {
  test('a bad profile or realistic setting is refused, naming it', async () => {
    await assert.rejects(
      createSimulator({ fixture: demoFixture() as never, profile: 'slow' as never }),
      /profile/,
    );
    await assert.rejects(
      createSimulator({
        fixture: demoFixture() as never,
        profile: 'realistic',
        realistic: { completion: { median_s: 60, p99_s: 30 } },
      }),
      /realistic\.completion\.p99_s: p99_s must be >= median_s/,
    );
  });

  test('speed and timeScale together are refused, naming both', async () => {
    await assert.rejects(
      createSimulator({ fixture: demoFixture() as never, speed: 60, timeScale: 1 }),
      /timeScale and speed/,
    );
  });

  test('with scaleRateWindow the limit is per simulated minute: at speed 60 a refused member is admitted again within real seconds', async (t) => {
    // timeScale undefined: the harness's own default (0.001) would conflict with speed.
    const harness = await startSimulator(t, {
      rateLimit: 3,
      timeScale: undefined,
      speed: 60,
      scaleRateWindow: true,
    });
    for (let i = 0; i < 3; i++) assert.equal((await harness.api('/profile')).status, 200);
    const refused = await harness.api('/profile');
    assert.equal(refused.status, 429);
    // Unscaled, the window would be a real minute; scaled it is one real second.
    await waitFor(async () => (await harness.api('/profile')).status === 200, {
      intervalMs: 100,
      timeoutMs: 10_000,
      message: 'admitted again after the scaled window',
    });
  });

  test('a refund planned days after SUCCESS with lost webhooks comes after the scaled days and sends no webhook', async (t) => {
    const sink = await startWebhookSink(t, { secrets: ['sim_secret_demo_M0001'] });
    const timeScale = 0.00001; // one simulated day = 864 real ms
    const harness = await startSimulator(t, { webhookUrl: sink.url, timeScale });
    const created = await harness.createOrder({
      partner_ref: 'refund-later',
      data: { user_id: userIdEndingIn('1234'), server_id: '2001' },
    });
    assert.equal(created.status, 201);
    const planned = await harness.control('/orders/refund-later/refund', {
      method: 'POST',
      json: { after_days: 2 },
    });
    assert.equal(planned.status, 200, planned.text);
    assert.equal(planned.body.lose_webhooks, true);

    const refunded = await waitFor(
      async () => {
        const order = await harness.getOrder('refund-later');
        return order.body.status === 'REFUNDED' ? order.body : null;
      },
      { message: 'the planned refund', timeoutMs: 15_000 },
    );
    const refundedAt = Date.now();
    assert.ok(
      refundedAt - Date.parse(String(refunded.success_at)) >= 2 * 86_400_000 * timeScale - 5,
      'not before two scaled days after SUCCESS',
    );
    const attempts = (await harness.control('/webhooks')).body as {
      status: string;
      error: string;
      faults: string[];
    }[];
    const refundAttempts = attempts.filter((a) => a.status === 'REFUNDED');
    assert.deepEqual(
      refundAttempts.map((a) => [a.error, a.faults]),
      [['dropped', ['planned_loss']]],
    );
    assert.equal(sink.deliveries.filter((d) => d.body?.data?.status === 'REFUNDED').length, 0);
    assert.equal(sink.deliveries.filter((d) => d.body?.data?.status === 'SUCCESS').length, 1);
  });

  test('a refund cannot be planned for an order already final other than SUCCESS', async (t) => {
    const harness = await startSimulator(t, {});
    const created = await harness.createOrder({
      partner_ref: 'failed-one',
      data: { user_id: userIdEndingIn('0002'), server_id: '2001' },
    });
    await waitFor(async () => (await harness.getOrder('failed-one')).body.status === 'FAILED', {
      message: 'FAILED',
    });
    assert.equal(created.status, 201);
    const answer = await harness.control('/orders/failed-one/refund', {
      method: 'POST',
      json: { after_days: 1 },
    });
    assert.equal(answer.status, 409);
  });
});
