import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ClaimedOrder } from '../../src/store/order-claims.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const DATA = { user_id: '12345678', server_id: '2001' };
const CANCEL = { code: 'CANCELLED', detail: 'the shop gave up' } as const;
/** Longer than any test here: a claim won in a round is still live at the end. */
const LEASE_MS = 3_600_000;
const ROUNDS = 60;

describeEachBackend('cancelling an order', (backend) => {
  test('a cancel and a claim racing on one order from two processes never both win: either it is cancelled and nobody holds a claim that could send it, or it is claimed and the cancel is refused', async (t) => {
    const { store, url } = await backend.tempStore(t, { now: Date.now, leaseMs: LEASE_MS });
    const other = await backend.open(t, url, { leaseMs: LEASE_MS });
    const won = { cancel: 0, claim: 0 };

    for (let round = 0; round < ROUNDS; round++) {
      // Half the rounds race the pump's claim of a queued order, half the reconciler's claim of
      // a blocked one (submitted again once the configuration works); each side starts first
      // in turn.
      const ref = `race-${round}`;
      const blocked = round % 2 === 1;
      await store.writer.createLocalOrder({ partnerRef: ref, productCode: 'ML86', data: DATA, queued: true });
      if (blocked) await store.writer.markBlocked(ref, 'INVALID_API_KEY', 'the key was refused');
      const cancel = () => store.writer.cancelOrder(ref, CANCEL);
      const claim = async (): Promise<ClaimedOrder | undefined> =>
        blocked
          ? (await other.claims.claimDueForPoll(10)).find((o) => o.partnerRef === ref)
          : other.claims.claimNextQueued();
      const [cancelled, claimed] =
        round % 4 < 2
          ? await Promise.all([cancel(), claim()])
          : await Promise.all([claim(), cancel()]).then(([c, x]) => [x, c] as const);

      const now = await store.queries.getOrder(ref);
      if (cancelled.cancelled) {
        won.cancel += 1;
        assert.equal(claimed, undefined, `${ref}: cancelled, and claimed too`);
        assert.equal(now?.submissionState, 'cancelled', ref);
        assert.equal(
          (await other.claims.claimNextQueued()) ?? (await other.claims.claimDueForPoll(10))[0],
          undefined,
          `${ref}: nobody can claim it afterwards`,
        );
      } else {
        won.claim += 1;
        assert.equal(cancelled.why, 'submitted', ref);
        assert.equal(claimed?.partnerRef, ref, `${ref}: refused, and nobody claimed it`);
        assert.equal(now?.submissionState, blocked ? 'blocked' : 'queued', ref);
        assert.ok(
          await other.writer.startSubmission(ref, claimed.claim, {
            leaseMs: other.claims.settings.leaseMs,
          }),
          `${ref}: its claim may send it`,
        );
        // Sent now: still not cancellable, by either process.
        assert.equal((await other.writer.cancelOrder(ref, CANCEL)).cancelled, false, ref);
      }
    }
    t.diagnostic(`${backend.name}: the cancel won ${won.cancel} rounds, the claim ${won.claim}`);
    assert.equal(won.cancel + won.claim, ROUNDS);
  });

  test('expiring takes the queued and blocked orders written before the bound, oldest first, as EXPIRED; none in doubt, claimed or newer; the pump’s claim skips them', async (t) => {
    const { store, clock } = await backend.tempStore(t, { leaseMs: 60_000 });
    const place = async (ref: string) => {
      await store.writer.createLocalOrder({ partnerRef: ref, productCode: 'ML86', data: DATA, queued: true });
      clock.advance(1);
    };
    await place('old-queued');
    await place('old-blocked');
    await store.writer.markBlocked('old-blocked', 'INVALID_API_KEY', 'the key was refused');
    await place('old-in-doubt');
    await store.writer.markBlocked('old-in-doubt', 'INVALID_API_KEY', 'refused after a time-out', {
      inDoubt: true,
    });
    await place('old-claimed');
    assert.equal((await store.claims.claimOrder('old-claimed'))?.claimed, true);
    clock.advance(1_000);
    const bound = clock.now();
    await place('young');

    const next = await store.claims.claimNextQueued({ writtenSince: bound });
    assert.equal(next?.partnerRef, 'young', 'the pump passes over the older queued order');
    await store.claims.releaseClaim('young', next!.claim);
    clock.advance(1_000);

    assert.deepEqual(await store.writer.expireWaitingOrders(bound), ['old-queued', 'old-blocked']);
    for (const ref of ['old-queued', 'old-blocked']) {
      const order = await store.queries.getPublicOrder(ref);
      assert.equal(order?.submission, 'cancelled', ref);
      assert.equal(order?.outcome, 'cancelled', ref);
      assert.equal(order?.cancellation?.code, 'EXPIRED', ref);
      assert.match(order?.cancellation?.detail ?? '', /API_SUBMISSION_MAX_AGE_S/, ref);
    }
    const left = await Promise.all(
      ['old-in-doubt', 'old-claimed', 'young'].map(
        async (ref) => (await store.queries.getOrder(ref))?.submissionState,
      ),
    );
    assert.deepEqual(left, ['blocked', 'queued', 'queued']);
    assert.deepEqual(
      (await store.feed.after(0, 100)).filter((e) => e.type === 'order.cancelled').map((e) => e.data),
      [await store.queries.getPublicOrder('old-queued'), await store.queries.getPublicOrder('old-blocked')],
    );
    assert.deepEqual(await store.writer.expireWaitingOrders(bound), [], 'each once');
  });
});
