import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withClaims } from '../../src/store/order-store.js';
import { rewindToSchema22, scheduleSettings } from '../helpers/store.js';
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

  test("each upstream has its own circuit: one supplier's open circuit stops only the processes calling it", async (t) => {
    const { store } = await backend.tempStore(t);
    const beta = withClaims(store, scheduleSettings(), 'beta');
    await beta.circuit.open('unauthorized', { code: 'INVALID_API_KEY', message: '401' });

    assert.equal(await store.circuit.state(), null, "the default upstream's stays closed");
    await store.circuit.open('upstream_failing', { code: 'SERVICE_UNAVAILABLE', message: '503' });
    await store.circuit.close();
    assert.equal(
      (await beta.circuit.state())?.code,
      'INVALID_API_KEY',
      "closing the default's leaves beta's open",
    );
  });

  test("an open circuit of a store from before the upstreams (schema 20) is the default upstream's after the upgrade", async (t) => {
    const { store, url } = await backend.tempStore(t);
    await store.db.write(async (tx) => {
      await rewindToSchema22(tx);
      await tx.exec('DROP TABLE upstream_circuit');
      await tx.exec(`
        CREATE TABLE upstream_circuit (
          id INTEGER PRIMARY KEY CHECK (id = 1), cause TEXT NOT NULL, code TEXT NOT NULL,
          message TEXT NOT NULL, fix TEXT, opened_at BIGINT NOT NULL, probed_at BIGINT,
          probes INTEGER NOT NULL DEFAULT 0
        );
        INSERT INTO upstream_circuit (id, cause, code, message, fix, opened_at, probed_at, probes)
          VALUES (1, 'base_url', 'NOT_FOUND', '404', 'check H2H_BASE_URL', 5, 6, 2);
      `);
      await tx.exec(tx.dialect.setSchemaVersionSql(20));
    });
    await store.close();

    const upgraded = await backend.open(t, url);
    assert.deepEqual(await upgraded.circuit.state(), {
      cause: 'base_url',
      code: 'NOT_FOUND',
      message: '404',
      fix: 'check H2H_BASE_URL',
      openedAt: 5,
      probedAt: 6,
      probes: 2,
    });
  });
});
