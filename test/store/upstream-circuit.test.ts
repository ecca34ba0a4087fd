import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openDatabase } from '../../src/store/database.js';
import { openOrderStore } from '../../src/store/order-store.js';
import { scheduleSettings, tempStore } from '../helpers/store.js';

test('the circuit is closed until opened; it keeps when it opened through later causes and failed probes, and every connection sees it', (t) => {
  const { store, clock, path } = tempStore(t);
  const other = openDatabase({ path });
  t.after(() => other.close());
  const elsewhere = openOrderStore(other, scheduleSettings(), { now: clock.now });
  assert.equal(store.circuit.state(), null);

  const opened = store.circuit.open('upstream_failing', { code: 'SERVICE_UNAVAILABLE', message: '503' });
  const openedAt = clock.now();
  clock.advance(60_000);
  const probed = store.circuit.probeFailed('unauthorized', {
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
  assert.deepEqual(elsewhere.circuit.state(), {
    cause: 'unauthorized',
    code: 'INVALID_API_KEY',
    message: '401',
    fix: 'check H2H_API_KEY',
    openedAt,
    probedAt: clock.now(),
    probes: 1,
  });
  assert.deepEqual(probed, elsewhere.circuit.state());
  assert.deepEqual(elsewhere.circuit.close(), probed, 'close returns what was open');
  assert.equal(store.circuit.state(), null);
  assert.equal(store.circuit.close(), null);
});
