import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PublicOrder } from '../../src/domain/public-order.js';
import { runCli } from '../helpers/cli.js';
import { tempStore } from '../helpers/store.js';

test('order show prints an order’s attempts, where each went and why, by the shop’s ref or the current attempt’s; --json gives them in the public form', async (t) => {
  const { store, path } = await tempStore(t, { now: Date.now });
  const env = { H2H_DB_PATH: path };
  await store.writer.createLocalOrder({
    partnerRef: 'shop-1',
    productCode: 'ML86',
    data: { user_id: '12345678', server_id: '2001' },
    queued: true,
    route: {
      policy: 'cheapest',
      reason: 'cheapest: price 15000 on default (best of 2 available candidates)',
      next: [{ upstream: 'beta', product_code: 'MLBB-86', price: 15_500 }],
    },
  });
  await store.writer.markRejected('shop-1', 'INSUFFICIENT_BALANCE', 'balance too low');

  for (const ref of ['shop-1', 'shop-1~2']) {
    const shown = await runCli(['order', 'show', ref], env);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(
      shown.stdout,
      /│ 1 +│ default +│ shop-1 +│ - +│ rejected +│ cheapest: price 15000 on default/,
    );
    assert.match(shown.stdout, /│ INSUFFICIENT_BALANCE: balance too low │/);
    assert.match(
      shown.stdout,
      /│ 2 +│ beta +│ shop-1~2 +│ - +│ queued +│ INSUFFICIENT_BALANCE on default; next candidate: beta/,
    );
  }
  const json = await runCli(['order', 'show', 'shop-1', '--json'], env);
  const { order } = JSON.parse(json.stdout) as { order: PublicOrder };
  assert.equal(order.partner_ref, 'shop-1');
  assert.deepEqual(
    order.attempts.map((a) => [a.upstream, a.partner_ref, a.ended?.code ?? null]),
    [
      ['default', 'shop-1', 'INSUFFICIENT_BALANCE'],
      ['beta', 'shop-1~2', null],
    ],
  );
});
