import assert from 'node:assert/strict';
import { test } from 'node:test';
import { enableEndpoint } from '../../src/notify/operations.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { liveOrder } from '../helpers/notify.js';
import { describeEachBackend } from '../helpers/store-backends.js';

describeEachBackend('enabling an endpoint', (backend) => {
  test('endpoints enable reads the endpoint, enables it and computes what it missed in one write: two at once, one enables', async (t) => {
    const { store } = await backend.tempStore(t);
    const endpoint = await store.endpoints.add({
      url: 'http://127.0.0.1:9/hook',
      events: ['order.*'],
      secret: generateEndpointSecret(),
    });
    await store.endpoints.disable(endpoint.id, 'test');
    await liveOrder(store, 'A-1'); // seq 1-4, committed while disabled
    await store.deliveries.record({
      endpointId: endpoint.id,
      seq: 2,
      type: 'order.updated',
      partnerRef: 'A-1',
      attempt: 1,
      requestedAt: 0,
      status: null,
      durationMs: null,
      error: null,
      outcome: 'skipped',
    });

    // Both started together: the second must see the first's enable, not the endpoint read before it.
    const [first, second] = await Promise.all([
      enableEndpoint(store, endpoint.id),
      enableEndpoint(store, endpoint.id),
    ]);
    assert.deepEqual(
      [first.changed, second.changed],
      [true, false],
      'only one of two simultaneous enables enabled it',
    );
    assert.deepEqual(first.missed, { fromSeq: 1, toSeq: 4 });
    assert.equal(second.missed, null);
    assert.equal(first.endpoint.fromSeq, 4);
    assert.equal(first.endpoint.disabledAt, null);
  });
});
