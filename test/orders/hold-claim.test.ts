import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { test } from 'node:test';
import { ClaimLostError, holdClaim } from '../../src/orders/hold-claim.js';
import type { OpenedStore } from '../../src/store/open-store.js';
import type { OrderClaims } from '../../src/store/order-claims.js';
import type { TempStoreOptions } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';
import { waitFor } from '../helpers/wait.js';

/** The lease of these tests: renewed every 100 ms (real time); a send needs 150 ms of it left (store time). */
const LEASE_MS = 300;
const DATA = { user_id: '12345678', server_id: '2001' };

/** The order's lease as the database holds it: its end (the store's clock) and its claim. */
async function leaseOf(
  store: OpenedStore,
  ref: string,
): Promise<{ until: number | null; claim: string | null }> {
  const row = await store.db.get<{ poll_leased_until: number | string | null; lease_token: string | null }>(
    'SELECT poll_leased_until, lease_token FROM orders WHERE partner_ref = @ref',
    { ref },
  );
  assert.ok(row, `no order ${ref}`);
  return {
    until: row.poll_leased_until === null ? null : Number(row.poll_leased_until),
    claim: row.lease_token,
  };
}

/**
 * The store's own claims, with a count of the renewals it was asked for (started, answered or
 * not): to know that a renewal is in flight.
 */
function countingRenewals(claims: OrderClaims): { claims: OrderClaims; started: () => number } {
  let started = 0;
  const counting = new Proxy(claims, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (key === 'renewClaim') {
        return (...args: Parameters<OrderClaims['renewClaim']>) => {
          started += 1;
          return target.renewClaim(...args);
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { claims: counting, started: () => started };
}

const isClaimLost = (pattern: RegExp) => (error: unknown) =>
  error instanceof ClaimLostError && error.code === 'CLAIM_LOST' && pattern.test(error.message);

describeEachBackend('holdClaim', (backend) => {
  /** A store on a manual clock with one queued order Q1, claimed by `holder` (default: that store). */
  async function claimedOrder(t: TestContext, options: TempStoreOptions = {}) {
    const { store, url, clock } = await backend.tempStore(t, { leaseMs: LEASE_MS, ...options });
    await store.writer.createLocalOrder({ partnerRef: 'Q1', productCode: 'ML86', data: DATA, queued: true });
    const claimed = await store.claims.claimNextQueued();
    assert.ok(claimed);
    return { store, url, clock, claimed };
  }

  test('renews the claim while the work runs: the lease moves on with the clock past its first end, and no other process takes the order', async (t) => {
    const { store, url, clock, claimed } = await claimedOrder(t);
    const other = await backend.open(t, url, { now: clock.now, leaseMs: LEASE_MS });

    const result = await holdClaim(store.claims, claimed, async (guard) => {
      for (let step = 1; step <= 6; step++) {
        clock.advance(LEASE_MS / 3);
        const renewedUntil = clock.now() + LEASE_MS;
        await waitFor(async () => (await leaseOf(store, 'Q1')).until === renewedUntil, {
          message: `renewal ${step}: the lease to end at ${renewedUntil}`,
        });
        guard.check();
      }
      assert.ok(clock.now() >= claimed.leasedUntil + LEASE_MS, 'a whole lease past the first end');
      assert.equal(await other.claims.claimNextQueued(), undefined, 'another process finds it held');
      assert.equal((await leaseOf(store, 'Q1')).claim, claimed.claim, 'by the same claim');
      assert.equal(guard.signal.aborted, false);
      return 'done';
    });

    assert.equal(result, 'done');
    clock.advance(LEASE_MS);
    assert.equal(
      (await other.claims.claimNextQueued())?.partnerRef,
      'Q1',
      'once the work is done it is no longer renewed: a lease later another process takes it',
    );
  });

  test('check() throws, and the signal aborts, once another process has taken the claim (here a host whose clock runs a lease ahead)', async (t) => {
    const { store, url, clock, claimed } = await claimedOrder(t);
    const ahead = await backend.open(t, url, { now: () => clock.now() + LEASE_MS, leaseMs: LEASE_MS });

    await holdClaim(store.claims, claimed, async (guard) => {
      guard.check();
      const taken = await ahead.claims.claimNextQueued();
      assert.equal(taken?.partnerRef, 'Q1', 'by its clock the lease ran out');
      await waitFor(() => guard.signal.aborted, { message: 'the renewal to find the claim taken' });
      assert.ok(isClaimLost(/taken by another process/)(guard.signal.reason));
      assert.throws(() => guard.check(), isClaimLost(/taken by another process/));
      assert.equal((await leaseOf(store, 'Q1')).claim, taken.claim, 'the new claim stays');
    });
  });

  test('check() throws once the lease ran out while the holder stood still and another process took the order', async (t) => {
    const { store, url, clock, claimed } = await claimedOrder(t);
    const other = await backend.open(t, url, { now: clock.now, leaseMs: LEASE_MS });

    await holdClaim(store.claims, claimed, async (guard) => {
      clock.advance(LEASE_MS);
      assert.equal((await other.claims.claimNextQueued())?.partnerRef, 'Q1');
      assert.throws(() => guard.check(), isClaimLost(/order Q1/));
      await waitFor(() => guard.signal.aborted, { message: 'the signal to abort' });
    });
  });

  test('once its renewals fail (its store closed), sends stop while half a lease is left, before another process could take the order', async (t) => {
    const { store, url, clock } = await backend.tempStore(t, { leaseMs: LEASE_MS });
    await store.writer.createLocalOrder({ partnerRef: 'Q1', productCode: 'ML86', data: DATA, queued: true });
    const holder = await backend.open(t, url, { now: clock.now, leaseMs: LEASE_MS });
    const claimed = await holder.claims.claimNextQueued();
    assert.ok(claimed);

    await holdClaim(holder.claims, claimed, async (guard) => {
      await holder.close();
      clock.advance(LEASE_MS / 2);
      guard.check(); // exactly half a lease left: a request sent now is answered in time
      clock.advance(1);
      await waitFor(() => guard.signal.aborted, { message: 'the signal to abort the wait for a slot' });
      assert.ok(isClaimLost(/may run out soon/)(guard.signal.reason));
      assert.throws(() => guard.check(), isClaimLost(/may run out soon/));
      assert.ok(clock.now() < claimed.leasedUntil, 'the lease has not run out');
      assert.equal(await store.claims.claimNextQueued(), undefined, 'nobody else could take the order yet');
    });
  });

  test('a renewal the store does not answer (another process holds the order locked) stops sends and aborts the wait while half a lease is left', async (t) => {
    const { store, url, clock, claimed } = await claimedOrder(t, { lockTimeoutMs: 60_000 });
    const lock = await backend.holdOrderLock(t, url, 'Q1');

    const renewals = countingRenewals(store.claims);
    let worked: Promise<void> | undefined;
    const holding = holdClaim(renewals.claims, claimed, (guard) => {
      worked = (async () => {
        await waitFor(() => renewals.started() > 0, { message: 'a renewal, which waits for the lock' });
        clock.advance(LEASE_MS / 2 + 1);
        // Nothing is sent meanwhile (a create waiting for a budget slot): the signal ends the wait.
        await waitFor(() => guard.signal.aborted, {
          message: 'the signal to abort the wait for a slot, with a renewal still unanswered',
        });
        assert.ok(isClaimLost(/may run out soon/)(guard.signal.reason));
        assert.throws(() => guard.check(), isClaimLost(/may run out soon/));
        assert.ok(clock.now() < claimed.leasedUntil, 'the lease has not run out');
        assert.equal((await leaseOf(store, 'Q1')).until, claimed.leasedUntil, 'and was never renewed');
      })();
      return worked;
    });
    // holdClaim returns once its unanswered renewal ends: when the lock goes.
    await worked?.finally(() => lock.release());
    await holding;
  });
});
