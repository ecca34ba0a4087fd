import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeEachBackend } from '../helpers/store-backends.js';

describeEachBackend('the upstream circuit', (backend) => {
  test('the circuit is closed until opened; it keeps when it opened through later causes and failed probes, and every connection sees it', async (t) => {
    const { store, clock, url } = await backend.tempStore(t);
    const elsewhere = await backend.open(t, url, { now: clock.now });
    assert.equal(await store.circuit.state(), null);

    const opened = await store.circuit.open('upstream_failing', {
      code: 'SERVICE_UNAVAILABLE',
      message: '503',
    });
    const openedAt = clock.now();
    clock.advance(60_000);
    const probed = await store.circuit.probeFailed('unauthorized', {
      code: 'INVALID_API_KEY',
      message: '401',
      fix: 'check H2H_API_KEY',
    });

    assert.deepEqual(opened, {
      cause: 'upstream_failing',
      code: 'SERVICE_UNAVAILABLE',
      message: '503',
      fix: null,
      openedAt,
      probedAt: null,
      probes: 0,
    });
    assert.deepEqual(await elsewhere.circuit.state(), {
      cause: 'unauthorized',
      code: 'INVALID_API_KEY',
      message: '401',
      fix: 'check H2H_API_KEY',
      openedAt,
      probedAt: clock.now(),
      probes: 1,
    });
    assert.deepEqual(probed, await elsewhere.circuit.state());
    assert.deepEqual(await elsewhere.circuit.close(), probed, 'close returns what was open');
    assert.equal(await store.circuit.state(), null);
    assert.equal(await store.circuit.close(), null);
  });
});
