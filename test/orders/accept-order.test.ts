import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AcceptOrderError, acceptOrder } from '../../src/orders/accept-order.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const DATA = { user_id: '12345678', server_id: '2001' };
const BACKLOG = 5;
const REQUESTS = 30;

describeEachBackend('taking a shop order', (backend) => {
  test('requests arriving together through two processes never queue more orders than the backlog: each new one is queued or refused BACKLOG_FULL, and a repeat of a queued one is still its order', async (t) => {
    const { store, url } = await backend.tempStore(t);
    const other = await backend.open(t, url);
    const options = { submissionBacklog: BACKLOG, retryAfterS: 60 };

    const answers = await Promise.allSettled(
      Array.from({ length: REQUESTS }, (_, i) =>
        acceptOrder(i % 2 === 0 ? store : other, `sale-${i}`, { product_code: 'ML86', data: DATA }, options),
      ),
    );

    const queued = answers.filter((a) => a.status === 'fulfilled');
    const refused = answers.filter((a) => a.status === 'rejected').map((a) => a.reason);
    assert.equal(queued.length, BACKLOG);
    assert.equal(refused.length, REQUESTS - BACKLOG);
    for (const reason of refused) {
      assert.ok(reason instanceof AcceptOrderError, String(reason));
      assert.equal(reason.code, 'BACKLOG_FULL');
    }
    assert.equal(await store.queries.countQueued(), BACKLOG);

    // The backlog is full, but a repeat of a queued order is that order, not a refusal.
    const first = queued[0]!.value.order;
    const again = await acceptOrder(store, first.partner_ref, { product_code: 'ML86', data: DATA }, options);
    assert.deepEqual(again, { replayed: true, order: first });
  });
});
