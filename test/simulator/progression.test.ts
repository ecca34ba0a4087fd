import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Order } from '../../src/upstream/model.js';
import { orderInput, startSimulator, type TestSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink, type WebhookDelivery, type WebhookSink } from '../helpers/webhook-sink.js';

/** A step of a timeline: the status and whether a serial number is set. */
type Step = [status: string, hasSerial: boolean | 'any'];

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;

/** A simulator whose webhooks all go to a sink that verifies them and answers 200. */
async function simulatorWithSink(t: Parameters<typeof startSimulator>[0]): Promise<{
  harness: TestSimulator;
  sink: WebhookSink;
}> {
  const sink = await startWebhookSink(t, { secrets: ['sim_secret_demo_M0001'] });
  // 0.02: status steps 40 ms apart, so event times never tie.
  const harness = await startSimulator(t, { webhookUrl: sink.url, timeScale: 0.02 });
  return { harness, sink };
}

/** Orders one MLBB-86 for a user id ending in `suffix` and waits for `steps.length` webhooks. */
async function runTimeline(
  t: Parameters<typeof startSimulator>[0],
  suffix: string,
  steps: Step[],
): Promise<{ harness: TestSimulator; created: Order; deliveries: WebhookDelivery[]; final: Order }> {
  const { harness, sink } = await simulatorWithSink(t);
  const created = await harness.createOrder({ data: { user_id: userIdEndingIn(suffix), server_id: '2001' } });
  assert.equal(created.status, 201);
  assert.equal(created.body.status, 'PENDING');
  const ref = created.body.partner_ref;
  const received = await sink.waitForDeliveries((d) => d.body?.data?.partner_ref === ref, steps.length, {
    message: `${steps.length} webhooks for suffix ${suffix}`,
  });
  // decisions.md: delivery order is not guaranteed, so the timeline is read in event order.
  const deliveries = [...received].sort(
    (a, b) => Date.parse(String(a.body?.created_at)) - Date.parse(String(b.body?.created_at)),
  );
  const final = (await harness.getOrder(ref)).body;

  assert.ok(
    deliveries.every((d) => d.signatureValid),
    'every webhook carries a valid signature',
  );
  const seen = deliveries.map((d) => [d.body?.data?.status, Boolean(d.body?.data?.serial_number)]);
  assert.deepEqual(
    seen.map(([status, serial], i) => [status, steps[i]?.[1] === 'any' ? 'any' : serial]),
    steps,
    `timeline of suffix ${suffix}`,
  );
  assert.deepEqual(
    deliveries.at(-1)?.body?.data,
    final,
    'the last webhook carries the order as GET shows it',
  );
  return { harness, created: created.body, deliveries, final };
}

describe('status progression by the last four digits of data.user_id', () => {
  test('0002: PENDING → FAILED with a message, and the amount is credited back', async (t) => {
    const { harness, final } = await runTimeline(t, '0002', [['FAILED', false]]);

    assert.equal(final.status, 'FAILED');
    assert.equal(final.success_at, null);
    assert.equal(final.serial_number, null);
    assert.equal(typeof final.message, 'string');
    assert.equal(await harness.balance(), harness.member.balance);
  });

  test('0003: PENDING → PROCESSING → SUCCESS with a serial number, amount stays debited', async (t) => {
    const { harness, final, created } = await runTimeline(t, '0003', [
      ['PROCESSING', false],
      ['SUCCESS', true],
    ]);

    assert.equal(final.status, 'SUCCESS');
    assert.match(final.success_at ?? '', ISO_UTC);
    assert.ok(Date.parse(final.success_at ?? '') >= Date.parse(created.created_at));
    assert.equal(final.message, null);
    assert.equal(await harness.balance(), harness.member.balance - created.amount);
  });

  test('0004: PENDING → PROCESSING → FAILED, and the amount is credited back', async (t) => {
    const { harness, final } = await runTimeline(t, '0004', [
      ['PROCESSING', false],
      ['FAILED', false],
    ]);

    assert.equal(final.status, 'FAILED');
    assert.equal(final.success_at, null);
    assert.equal(typeof final.message, 'string');
    assert.equal(await harness.balance(), harness.member.balance);
  });

  test('0005: PENDING → SUCCESS without a serial → SUCCESS with a serial', async (t) => {
    const { harness, final, deliveries, created } = await runTimeline(t, '0005', [
      ['SUCCESS', false],
      ['SUCCESS', true],
    ]);

    assert.equal(deliveries[0]?.body?.data?.serial_number, null);
    assert.match(String(deliveries[0]?.body?.data?.success_at), ISO_UTC);
    assert.equal(final.status, 'SUCCESS');
    assert.equal(typeof final.serial_number, 'string');
    assert.notEqual(deliveries[0]?.eventId, deliveries[1]?.eventId, 'two distinct events');
    assert.equal(await harness.balance(), harness.member.balance - created.amount);
  });

  test('0006: PENDING → SUCCESS → REFUNDED with a message, and the amount is credited back', async (t) => {
    const { harness, final } = await runTimeline(t, '0006', [
      ['SUCCESS', 'any'],
      ['REFUNDED', 'any'],
    ]);

    assert.equal(final.status, 'REFUNDED');
    assert.equal(typeof final.message, 'string');
    assert.equal(await harness.balance(), harness.member.balance);
  });

  test('any other suffix: PENDING → SUCCESS with a serial number and success_at', async (t) => {
    const { harness, final, created } = await runTimeline(t, '4321', [['SUCCESS', true]]);

    assert.equal(final.status, 'SUCCESS');
    assert.match(final.success_at ?? '', ISO_UTC);
    assert.equal(final.message, null);
    assert.equal(await harness.balance(), harness.member.balance - created.amount);
  });

  test('0007: stays PENDING while others progress, then moves when the control API moves it', async (t) => {
    const { harness, sink } = await simulatorWithSink(t);
    const parked = await harness.createOrder(
      orderInput({ data: { user_id: userIdEndingIn('0007'), server_id: '2001' } }),
    );
    // 0005 has the longest automatic timeline; once it is done, 0007 would have moved if it could.
    const moving = await harness.createOrder({
      data: { user_id: userIdEndingIn('0005'), server_id: '2001' },
    });
    await sink.waitForDeliveries(
      (d) => d.body?.data?.partner_ref === moving.body.partner_ref && Boolean(d.body?.data?.serial_number),
    );

    const still = await harness.getOrder(parked.body.partner_ref);
    assert.equal(still.body.status, 'PENDING');
    assert.equal(sink.forRef(parked.body.partner_ref).length, 0);

    const moved = await harness.setStatus(parked.body.partner_ref, {
      status: 'SUCCESS',
      serial_number: 'SN-CONTROL-1',
    });
    assert.equal(moved.status, 200);
    const [delivery] = await sink.waitForDeliveries(
      (d) => d.body?.data?.partner_ref === parked.body.partner_ref,
    );
    assert.equal(delivery?.body?.data?.status, 'SUCCESS');
    assert.equal(delivery?.body?.data?.serial_number, 'SN-CONTROL-1');
    assert.equal((await harness.getOrder(parked.body.partner_ref)).body.serial_number, 'SN-CONTROL-1');
  });

  test('the timeline is chosen by data.user_id for every product shape (FF user id only, GI region)', async (t) => {
    const { harness, sink } = await simulatorWithSink(t);

    const ff = await harness.createOrder({
      product_code: 'FF-70',
      data: { user_id: userIdEndingIn('0002', 10) },
    });
    const gi = await harness.createOrder({
      product_code: 'GI-60',
      data: { user_id: userIdEndingIn('0002', 10), server_id: 'os_usa' },
    });

    for (const ref of [ff.body.partner_ref, gi.body.partner_ref]) {
      const [delivery] = await sink.waitForDeliveries((d) => d.body?.data?.partner_ref === ref);
      assert.equal(delivery?.body?.data?.status, 'FAILED', ref);
    }
    await waitFor(async () => (await harness.balance()) === harness.member.balance, {
      message: 'both failed orders credited back',
    });
  });

  test('the time scale shrinks the delays: at 0.02 a timeline ends while at 1 the order is still PENDING', async (t) => {
    const fast = await simulatorWithSink(t);
    const slowSink = await startWebhookSink(t, { secrets: ['sim_secret_demo_M0001'] });
    const slow = await startSimulator(t, { webhookUrl: slowSink.url, timeScale: 1 });
    const data = { user_id: userIdEndingIn('0003'), server_id: '2001' };

    const slowOrder = await slow.createOrder({ data });
    const fastOrder = await fast.harness.createOrder({ data });
    await fast.sink.waitForDeliveries((d) => d.body?.data?.partner_ref === fastOrder.body.partner_ref, 2);

    assert.equal((await slow.getOrder(slowOrder.body.partner_ref)).body.status, 'PENDING');
    assert.equal(slowSink.deliveries.length, 0);
  });
});
