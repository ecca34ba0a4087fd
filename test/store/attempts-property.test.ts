// A property of failover over random supplier behaviour (docs/upstreams.md, "Orders and
// attempts"): each attempt of a shop order meets a create that is refused (for the balance, the
// product or the target), answered, or unanswered (the order placed or not), then a last status
// (SUCCESS, FAILED, or SUCCESS then REFUNDED), told by webhook or, the webhook lost, by a poll,
// and late news of it afterwards. Three suppliers keep their own books. Whatever happens:
// at most one SUCCESS per shop order across all suppliers, no attempt after a SUCCESS, no
// failover while an outcome is unknown, failover exactly on a definite non-fulfilment, and the
// ledger's net spend equals what the suppliers debited minus what they refunded, and the
// settlement report (docs/settlement.md) counts for each supplier exactly what it debited and
// what it refunded.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { OrderRoute } from '../../src/domain/attempts.js';
import { SettlementTally } from '../../src/domain/settlement.js';
import { withClaims } from '../../src/store/order-store.js';
import { ordersPlaced } from '../../src/store/settlement-scan.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import { snapshot, type TestStore } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const UPSTREAMS = ['default', 'beta', 'gamma'] as const;
type Upstream = (typeof UPSTREAMS)[number];
const PRICE: Record<Upstream, number> = { default: 15_000, beta: 15_500, gamma: 16_000 };
const ROUTE: OrderRoute = {
  policy: 'priority',
  reason: 'priority: default first in the configured order (best of 3 available candidates)',
  next: [
    { upstream: 'beta', product_code: 'ML86', price: PRICE.beta },
    { upstream: 'gamma', product_code: 'ML86', price: PRICE.gamma },
  ],
};
const DATA = { user_id: '12345678', server_id: '2001' };

const CREATES = [
  'answered',
  'refused_balance',
  'refused_product',
  'refused_target',
  'unanswered_placed',
  'unanswered_lost',
] as const;
/** What one supplier does with one attempt. */
const behaviour = fc.record({
  create: fc.constantFrom(...CREATES),
  end: fc.constantFrom('SUCCESS', 'FAILED', 'REFUNDED'),
  webhookLost: fc.boolean(),
  processing: fc.boolean(),
  lateNews: fc.boolean(),
});
type Behaviour = typeof behaviour extends fc.Arbitrary<infer B> ? B : never;

/** One supplier's books: the orders it holds by partner_ref, and the money it took and gave back. */
class Supplier {
  readonly orders = new Map<string, string>();
  debited = 0;
  refunded = 0;
  constructor(readonly price: number) {}
  place(ref: string): void {
    if (this.orders.has(ref)) return; // the same partner_ref again is the same order (spec §4)
    this.orders.set(ref, 'PENDING');
    this.debited += this.price;
  }
  end(ref: string, status: string): void {
    this.orders.set(ref, status);
    if (status === 'FAILED' || status === 'REFUNDED') this.refunded += this.price;
  }
}

describeEachBackend('failover over random supplier behaviour', (backend) => {
  test('at most one SUCCESS per shop order, none after it, no failover while unknown, and the ledger and the settlement report net what the suppliers did', async (t) => {
    const { store, clock } = await backend.tempStore(t, {
      failover: { maxAttempts: 3, withinMs: 3_600_000 },
    });
    for (const upstream of UPSTREAMS) {
      await store.catalog.applySync({
        ...catalogSnapshot({ readAt: clock.now(), price: PRICE[upstream], balance: 100_000_000 }),
        upstream,
      });
    }
    const suppliers = Object.fromEntries(UPSTREAMS.map((u) => [u, new Supplier(PRICE[u])])) as Record<
      Upstream,
      Supplier
    >;
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(behaviour, { minLength: 3, maxLength: 3 }), async (behaviours) => {
        run += 1;
        await driveOrder(store, clock, suppliers, `S${run}`, behaviours);
        await assertLedger(store, suppliers);
        await assertSettlement(store, suppliers);
      }),
      { numRuns: backend.name === 'sqlite' ? 60 : 15, seed: 28 },
    );
  });
});

/** One shop order through its attempts as the pumps, the reconcilers and the webhooks would drive it. */
async function driveOrder(
  store: TestStore,
  clock: { now(): number; advance(ms: number): void },
  suppliers: Record<Upstream, Supplier>,
  shopRef: string,
  behaviours: Behaviour[],
): Promise<void> {
  await store.writer.admitQueuedOrder(
    {
      partnerRef: shopRef,
      productCode: 'ML86',
      data: DATA,
      catalog: { name: 'ML 86', price: PRICE.default },
      route: ROUTE,
    },
    1_000,
  );
  let succeeded: string | null = null;
  for (;;) {
    const order = (await store.queries.getOrder(shopRef))!;
    if (order.submissionState !== 'queued') break;
    assert.equal(succeeded, null, `${shopRef}: an attempt after ${succeeded} succeeded`);
    const upstream = order.upstream as Upstream;
    const ref = order.partnerRef;
    const supplier = suppliers[upstream];
    const b = behaviours[order.attempt - 1]!;
    clock.advance(1_000);

    const claims = withClaims(store, store.claims.settings, upstream).claims;
    const claimed = (await claims.claimNextQueued())!;
    assert.equal(claimed.partnerRef, ref, `${upstream}'s pump takes the attempt queued for it`);
    await store.writer.startSubmission(ref, claimed.claim, { leaseMs: 60_000 });
    const news = (status: string) =>
      snapshot(ref, status, {
        amount: supplier.price,
        product_name: 'ML 86',
        created_at: new Date(clock.now()).toISOString(),
        ...(status === 'SUCCESS' || status === 'REFUNDED' ? { serial_number: `SN-${ref}` } : {}),
      });
    const tell = (status: string) =>
      store.writer.applyOrderSnapshot(
        news(status),
        b.webhookLost
          ? { source: 'poll', upstream }
          : { source: 'webhook', eventId: `${ref}-${status}`, upstream },
      );
    const stillOn = async (why: string) =>
      assert.equal(
        (await store.queries.getOrder(shopRef))!.partnerRef,
        ref,
        `${shopRef}: no failover ${why}`,
      );

    const refusal = {
      refused_balance: 'INSUFFICIENT_BALANCE',
      refused_product: 'INVALID_PRODUCT',
      refused_target: 'INVALID_TARGET',
    } as const;
    if (b.create in refusal) {
      await store.writer.markRejected(ref, refusal[b.create as keyof typeof refusal], 'refused', {
        claim: claimed.claim,
      });
    } else {
      if (b.create === 'answered') {
        supplier.place(ref);
        await store.writer.applyOrderSnapshot(news('PENDING'), { source: 'create', upstream });
      } else {
        if (b.create === 'unanswered_placed') supplier.place(ref);
        await store.writer.markSubmissionUnknown(ref, { claim: claimed.claim });
        await stillOn('while the create is unknown');
        // The reconciler resolves it on the same upstream: it reads the order, or (404) sends the
        // create again under the same partner_ref, which the supplier books once.
        supplier.place(ref);
        await store.writer.applyOrderSnapshot(news('PENDING'), {
          source: b.create === 'unanswered_placed' ? 'poll' : 'create',
          upstream,
        });
      }
      await stillOn('while PENDING');
      if (b.processing) {
        await tell('PROCESSING');
        await stillOn('while PROCESSING');
      }
      if (b.end === 'FAILED') {
        supplier.end(ref, 'FAILED');
        await tell('FAILED');
      } else {
        supplier.end(ref, 'SUCCESS');
        await tell('SUCCESS');
        succeeded = ref;
        if (b.end === 'REFUNDED') {
          supplier.end(ref, 'REFUNDED');
          await tell('REFUNDED');
        }
      }
    }
    if (b.lateNews) {
      // The same news again, late (a retried webhook with a new id, a slow poll): it moves nothing.
      const before = await store.queries.getPublicOrderByPartnerRef(shopRef);
      const last = supplier.orders.get(ref);
      if (last)
        await store.writer.applyOrderSnapshot(news(last), {
          source: 'webhook',
          eventId: `${ref}-late`,
          upstream,
        });
      assert.deepEqual(
        await store.queries.getPublicOrderByPartnerRef(shopRef),
        before,
        `${shopRef}: late news of ${ref}`,
      );
    }

    const after = (await store.queries.getOrder(shopRef))!;
    const definite =
      b.create === 'refused_balance' ||
      b.create === 'refused_product' ||
      (b.create !== 'refused_target' && b.end === 'FAILED');
    const movesOn = definite && order.attempt < 3;
    assert.equal(
      after.attempt,
      movesOn ? order.attempt + 1 : order.attempt,
      `${shopRef}: ${JSON.stringify(b)}`,
    );
  }
  const successes = UPSTREAMS.flatMap((u) =>
    [...suppliers[u].orders].filter(
      ([ref, s]) => ref.split('~')[0] === shopRef && (s === 'SUCCESS' || s === 'REFUNDED'),
    ),
  );
  assert.ok(successes.length <= 1, `${shopRef}: ${successes.length} successes`);
  const shop = (await store.queries.getPublicOrderByPartnerRef(shopRef))!;
  assert.equal(shop.partner_ref, shopRef);
  assert.equal(shop.attempts.at(-1)!.partner_ref, (await store.queries.getOrder(shopRef))!.partnerRef);
}

/** The ledger's net spend over every upstream equals the suppliers' debits minus their refunds. */
async function assertLedger(store: TestStore, suppliers: Record<Upstream, Supplier>): Promise<void> {
  for (const upstream of UPSTREAMS) {
    const ledger = await store.balance.viewOf(upstream);
    const supplier = suppliers[upstream];
    assert.equal(
      ledger.debited - ledger.credited,
      supplier.debited - supplier.refunded,
      `${upstream}: the ledger's net spend is the supplier's`,
    );
  }
}

/** The settlement of every order placed so far: each supplier spent what it debited, credited what it refunded. */
async function assertSettlement(store: TestStore, suppliers: Record<Upstream, Supplier>): Promise<void> {
  const tally = new SettlementTally();
  for await (const page of ordersPlaced(store.context.db, { from: 0, to: Number.MAX_SAFE_INTEGER })) {
    for (const row of page) tally.add(row, 'all');
  }
  const totals = tally.report().totals;
  for (const upstream of UPSTREAMS) {
    const total = totals.find((x) => x.upstream === upstream);
    assert.deepEqual(
      { spent: total?.spent ?? 0, credited: total?.credited ?? 0 },
      { spent: suppliers[upstream].debited, credited: suppliers[upstream].refunded },
      `${upstream}: the settlement is what the supplier did`,
    );
  }
}
