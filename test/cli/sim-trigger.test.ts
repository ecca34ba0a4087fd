import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TriggerResult } from '../../src/simulator/sim-trigger-actions.js';
import { runCli } from '../helpers/cli.js';
import { SECRET } from '../helpers/receiver.js';
import { startSimulator, uniqueRef } from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';

test('sim trigger moves a simulator order to a status, whose webhook is then delivered', async (t) => {
  const sink = await startWebhookSink(t, { secrets: [SECRET] });
  const { sim, createOrder, getOrder } = await startSimulator(t, { webhookUrl: sink.url });
  const ref = uniqueRef('trigger');
  assert.equal((await createOrder({ partner_ref: ref })).status, 201);

  const run = await runCli(
    ['sim', 'trigger', ref, 'success', '--serial', 'SN-TRIGGER-1', '--sim-url', sim.origin, '--json'],
    {},
  );
  assert.equal(run.code, 0, run.stderr);
  const { order, faults } = JSON.parse(run.stdout) as TriggerResult;
  assert.equal(order.partner_ref, ref);
  assert.equal(order.status, 'SUCCESS');
  assert.equal(order.serial_number, 'SN-TRIGGER-1');
  assert.equal(faults, undefined, 'no fault was asked for');
  assert.equal((await getOrder(ref)).body.status, 'SUCCESS', 'the member API sees it');
  await sink.waitForDeliveries(
    (d) => d.body?.data?.partner_ref === ref && d.body?.data?.status === 'SUCCESS',
  );

  // The table form, by invoice number, found through H2H_BASE_URL's origin.
  const refund = await runCli(['sim', 'trigger', order.invoice_number, 'REFUNDED'], {
    H2H_BASE_URL: sim.baseUrl,
  });
  assert.equal(refund.code, 0, refund.stderr);
  assert.match(refund.stdout, new RegExp(`│ ${ref} +│ ${order.invoice_number} +│ REFUNDED `));
});

test('sim trigger --fault switches faults on before the change: a dropped webhook is never delivered', async (t) => {
  const sink = await startWebhookSink(t, { secrets: [SECRET] });
  const { sim, createOrder, control } = await startSimulator(t, { webhookUrl: sink.url });
  const ref = uniqueRef('trigger-fault');
  assert.equal((await createOrder({ partner_ref: ref })).status, 201);

  const run = await runCli(
    [
      'sim',
      'trigger',
      ref,
      'FAILED',
      '--fault',
      'webhook_drop',
      '--fault',
      'webhook_delay_ms=5',
      '--sim-url',
      sim.origin,
      '--json',
    ],
    {},
  );
  assert.equal(run.code, 0, run.stderr);
  const { order, faults } = JSON.parse(run.stdout) as TriggerResult;
  assert.equal(order.status, 'FAILED');
  assert.equal(faults?.webhook_drop, 1);
  assert.equal(faults?.webhook_delay_ms, 5);
  assert.deepEqual((await control('/faults')).body, faults, 'the simulator holds them');
  // The attempt is recorded as dropped in the simulator's webhook log, and was never sent.
  await waitFor(
    async () =>
      (
        (await control('/webhooks')).body as Array<{
          partner_ref: string;
          status: string;
          error: string | null;
        }>
      ).some((a) => a.partner_ref === ref && a.status === 'FAILED' && a.error === 'dropped'),
    { message: `a dropped FAILED attempt for ${ref}` },
  );
  assert.deepEqual(
    sink.forRef(ref).filter((d) => d.body?.data?.status === 'FAILED'),
    [],
  );

  const off = await runCli(
    ['sim', 'trigger', ref, 'REFUNDED', '--fault', 'webhook_drop=off', '--sim-url', sim.origin, '--json'],
    {},
  );
  assert.equal(off.code, 1, 'FAILED → REFUNDED is not allowed');
  assert.equal((await control('/faults')).body.webhook_drop, 0, 'the fault was turned off first');
});

test('sim trigger: an unknown order, status or fault is a usage error (2); a refused transition is 1', async (t) => {
  const { sim, createOrder } = await startSimulator(t);
  const ref = uniqueRef('trigger-bad');
  assert.equal((await createOrder({ partner_ref: ref })).status, 201);
  const at = ['--sim-url', sim.origin];

  const unknownOrder = await runCli(['sim', 'trigger', 'no-such-order', 'SUCCESS', ...at], {});
  assert.equal(unknownOrder.code, 2);
  assert.match(unknownOrder.stderr, /no order no-such-order in the simulator/);

  const badStatus = await runCli(['sim', 'trigger', ref, 'DONE', ...at], {});
  assert.equal(badStatus.code, 2);
  assert.match(
    badStatus.stderr,
    /unknown status DONE: one of PENDING, PROCESSING, SUCCESS, FAILED, REFUNDED/,
  );

  const badFault = await runCli(
    ['sim', 'trigger', ref, 'SUCCESS', '--fault', 'webhook_lost', ...at, '--json'],
    {},
  );
  assert.equal(badFault.code, 2);
  assert.match(
    (JSON.parse(badFault.stdout) as { error: { message: string } }).error.message,
    /unknown fault webhook_lost: one of webhook_drop/,
  );

  const badValue = await runCli(['sim', 'trigger', ref, 'SUCCESS', '--fault', 'error_5xx=2', ...at], {});
  assert.equal(badValue.code, 2);
  assert.match(badValue.stderr, /error_5xx must be between 0 and 1/);

  const refused = await runCli(['sim', 'trigger', ref, 'REFUNDED', ...at], {});
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /refused PENDING -> REFUNDED/);

  const noSim = await runCli(['sim', 'trigger', ref, 'SUCCESS', '--sim-url', 'http://127.0.0.1:1'], {});
  assert.equal(noSim.code, 2);
  assert.match(noSim.stderr, /no simulator answers at http:\/\/127\.0\.0\.1:1/);

  const noFixture = await runCli(['sim'], {});
  assert.equal(noFixture.code, 2, 'sim itself still needs --fixture');
  assert.match(noFixture.stderr, /required option '--fixture <path>' not specified/);
});
