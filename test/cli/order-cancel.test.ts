import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PublicOrder } from '../../src/domain/public-order.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { runCli } from '../helpers/cli.js';
import { snapshot, tempStore } from '../helpers/store.js';

const DATA = { user_id: '12345678', server_id: '2001' };

/** Order `ref` as the shop API queues it, or (`queued: false`) as `order create` sends it. */
function place(store: OrderStore, ref: string, { queued = true }: { queued?: boolean } = {}) {
  return store.writer.createLocalOrder({ partnerRef: ref, productCode: 'ML86', data: DATA, queued });
}

test('order cancel cancels a queued order (exit 0, the public order with --json) and says when it already was; an order already sent exits 1 with ORDER_ALREADY_SUBMITTED and stays as it was; an unknown ref exits 1 NOT_FOUND', async (t) => {
  const { store, path } = await tempStore(t, { now: Date.now });
  const env = { H2H_DB_PATH: path };
  await place(store, 'queued-1');
  await place(store, 'queued-2');
  await place(store, 'sent', { queued: false });
  await store.writer.applyOrderSnapshot(snapshot('sent', 'PENDING'), { source: 'create' });

  const json = await runCli(['order', 'cancel', 'queued-1', '--json'], env);
  assert.equal(json.code, 0, json.stderr);
  const order = JSON.parse(json.stdout) as PublicOrder;
  assert.deepEqual(order, await store.queries.getPublicOrder('queued-1'));
  assert.equal(order.submission, 'cancelled');
  assert.equal(order.outcome, 'cancelled');
  assert.deepEqual(order.cancellation, { code: 'CANCELLED', detail: 'cancelled with h2h-sync order cancel' });
  assert.deepEqual(
    (await store.feed.after(0, 100)).filter((e) => e.type === 'order.cancelled').map((e) => e.data),
    [order],
  );

  const table = await runCli(['order', 'cancel', 'queued-2'], env);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /│ queued-2 .*│ cancelled: CANCELLED │/);
  assert.match(table.stdout, /^cancelled: queued-2 is never sent to the upstream$/m);
  const again = await runCli(['order', 'cancel', 'queued-2'], env);
  assert.equal(again.code, 0, again.stderr);
  assert.match(
    again.stdout,
    /^already cancelled \(CANCELLED: cancelled with h2h-sync order cancel\): nothing changed$/m,
  );
  assert.equal(
    (await store.feed.after(0, 100)).filter((e) => e.type === 'order.cancelled').length,
    2,
    'no second event',
  );

  const before = await store.queries.getPublicOrder('sent');
  const refused = await runCli(['order', 'cancel', 'sent'], env);
  assert.equal(refused.code, 1);
  assert.match(
    refused.stderr,
    /^error: order sent was already sent to the upstream \(submission accepted\): it can no longer be cancelled; follow it to its outcome with h2h-sync order show sent$/m,
  );
  const refusedJson = await runCli(['order', 'cancel', 'sent', '--json'], env);
  assert.equal(refusedJson.code, 1);
  assert.equal(JSON.parse(refusedJson.stdout).error.code, 'ORDER_ALREADY_SUBMITTED');
  assert.deepEqual(await store.queries.getPublicOrder('sent'), before, 'as it was');

  const missing = await runCli(['order', 'cancel', 'no-such-order', '--json'], env);
  assert.equal(missing.code, 1);
  assert.equal(JSON.parse(missing.stdout).error.code, 'NOT_FOUND');
});
