import assert from 'node:assert/strict';
import { test } from 'node:test';
import { syncCatalog } from '../../src/catalog/catalog-sync.js';
import { placeOrder } from '../../src/orders/place-order.js';
import { pollOrderNow } from '../../src/reconciler/early-poll.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import { scriptedUpstream } from '../helpers/scripted-upstream.js';
import { startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const MINUTE = 60_000;
const DAY = 86_400_000;

describeEachBackend('the balance drift', (backend) => {
  test('an order whose create is in doubt across two refreshes raises no drift, and once learnt leaves none', async (t) => {
    const sim = await startSimulator(t);
    // The first create of IN-FLIGHT reaches the simulator (which debits it) and is never answered.
    const upstream = await scriptedUpstream(t, sim.sim.origin, (received) =>
      received.method === 'POST' && received.body.includes('IN-FLIGHT') ? 'forward-unanswered' : 'forward',
    );
    const { store, clock } = await backend.tempStore(t, { balanceDriftThreshold: 5_000 });
    const client = new UpstreamClient({
      baseUrl: upstream.baseUrl,
      apiKey: sim.member.api_key,
      headersTimeoutMs: 300,
      retry: { maxAttempts: 1, baseDelayMs: 5, maxDelayMs: 20 },
    });
    t.after(() => client.close());
    const refresh = async () => {
      clock.advance(15 * MINUTE);
      return (await syncCatalog({ store, client, now: clock.now })).drift!;
    };
    await refresh();

    const placed = await placeOrder(
      { client, store },
      {
        productCode: 'MLBB-86',
        data: { user_id: userIdEndingIn('0007'), server_id: '2001' },
        partnerRef: 'IN-FLIGHT',
      },
    );
    assert.equal(placed.outcome, 'unknown', 'its create is in doubt');
    const price = (await store.catalog.find({ code: 'MLBB-86' }))!.price;

    for (const read of [await refresh(), await refresh()]) {
      assert.deepEqual(
        [read.drift, read.in_doubt, read.unexplained_drift, read.drift_since],
        [-price, price, 0, null],
        'debited upstream, not yet here: the create in doubt explains it',
      );
    }
    const driftEvents = async () =>
      (await store.feed.after(0, 1000)).filter((e) => e.type === 'balance.drift').length;
    assert.equal(await driftEvents(), 0, 'no balance.drift for an order in flight');

    const polled = await pollOrderNow({ store, client, settings: { passSize: 10 } }, 'IN-FLIGHT');
    assert.equal(polled.kind, 'polled');
    assert.equal((await store.queries.getOrder('IN-FLIGHT'))!.submissionState, 'accepted');
    const learnt = await refresh();
    assert.deepEqual(
      [learnt.drift, learnt.in_doubt, learnt.unexplained_drift],
      [0, 0, 0],
      'the debit learnt after a read is the drift that read found: together, nothing',
    );
    assert.equal(await driftEvents(), 0);
  });

  test('a positive drift steers the audit to the most recent final SUCCESS orders not checked since it began, until refunds found explain it', async (t) => {
    const { store, clock } = await backend.tempStore(t, { balanceDriftThreshold: 5_000 });
    const read = (balance: number) => {
      clock.advance(15 * MINUTE);
      return store.catalog.applySync(catalogSnapshot({ readAt: clock.now(), price: 15_000, balance }));
    };
    await read(1_000_000);
    for (const ref of ['A', 'B', 'C']) {
      await store.writer.applyOrderSnapshot(snapshot(ref, 'SUCCESS', { serial_number: `SN-${ref}` }), {
        source: 'webhook',
        eventId: `e-${ref}`,
      });
      clock.advance(MINUTE);
    }
    assert.equal(
      await store.claims.claimForAudit(),
      undefined,
      'checked within the day: no plain audit read',
    );

    await read(1_000_000 - 45_000 + 15_000); // B was refunded upstream; its webhooks were lost
    const drift = (await store.balance.driftOf('default'))!;
    assert.deepEqual([drift.drift, drift.unexplained_drift, drift.audit_steered], [15_000, 15_000, true]);

    const first = (await store.claims.claimForAudit())!;
    assert.equal(first.partnerRef, 'C', 'the most recent final first');
    await store.claims.recordPoll('C', { claim: first.claim });
    const second = (await store.claims.claimForAudit())!;
    assert.equal(second.partnerRef, 'B', 'C was checked since the drift began');
    await store.writer.applyOrderSnapshot(snapshot('B', 'REFUNDED', { serial_number: 'SN-B' }), {
      source: 'poll',
    });
    assert.equal((await store.balance.driftOf('default'))!.audit_steered, false);
    assert.equal(await store.claims.claimForAudit(), undefined, 'explained: the plain audit again');

    await read(1_000_000 - 45_000 + 15_000);
    assert.deepEqual(
      [
        (await store.balance.driftOf('default'))!.drift,
        (await store.balance.driftOf('default'))!.drift_since,
      ],
      [0, null],
    );
    clock.advance(DAY);
    assert.equal((await store.claims.claimForAudit())?.partnerRef, 'A', 'least recently checked first again');
  });
});
