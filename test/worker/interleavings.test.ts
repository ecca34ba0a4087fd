import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { encodeWebhookRawBody, type WebhookJobData, webhookIdentity } from '../../src/queue/webhook-queue.js';
import type { OrderStore } from '../../src/store/order-store.js';
import type { Order } from '../../src/upstream/model.js';
import { applyCommit, applyWebhookJob } from '../../src/worker/event-worker.js';
import { privateRedis } from '../helpers/redis.js';
import { openTestStore, snapshot, tempDbPath } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';
import { waitFor } from '../helpers/wait.js';
import {
  cleanupScope,
  queueWebhook,
  startTestWorker,
  testProducer,
  webhookBodyOf,
} from '../helpers/worker.js';

/**
 * The property of issue 4: whatever the interleaving, duplication and reordering of the events
 * of several orders, each order ends in the state of the latest step of its life among the
 * events that arrived. The expectation is computed here from the event list alone: an order's
 * life is a line of snapshots (docs/simulator.md, "Status timelines"), each reachable from every
 * earlier one, so the latest arrived step wins whatever the order of arrival.
 */

/** The timelines of decisions.md's states, by the simulator's magic suffix: each step a status. */
const TIMELINES = {
  '0002': ['PENDING', 'FAILED'],
  '0003': ['PENDING', 'PROCESSING', 'SUCCESS+serial'],
  '0004': ['PENDING', 'PROCESSING', 'FAILED'],
  '0005': ['PENDING', 'SUCCESS', 'SUCCESS+serial'],
  '0006': ['PENDING', 'SUCCESS+serial', 'REFUNDED'],
  other: ['PENDING', 'SUCCESS+serial'],
} as const;
type Suffix = keyof typeof TIMELINES;

/** The order as the upstream reports it at each step of its timeline. */
function lifeOf(ref: string, suffix: Suffix): Order[] {
  return TIMELINES[suffix].map((step) =>
    step === 'SUCCESS+serial'
      ? snapshot(ref, 'SUCCESS', { serial_number: `SN-${ref}` })
      : snapshot(ref, step, step === 'REFUNDED' ? { serial_number: `SN-${ref}` } : {}),
  );
}

interface OrderPlan {
  suffix: Suffix;
  /** Written locally before its events (placed here); its create answer is then one more event. */
  placedHere: boolean;
  /** Per step: false when that event is lost (at least one arrives). */
  arrives: boolean[];
  /** Steps delivered again: with the same event id, or without the event id header. */
  duplicates: { step: number; withoutHeader: boolean }[];
}

/** One delivery of the scenario. */
interface Delivery {
  order: number;
  step: number;
  /** `webhook`: a queued event; `create`: the create answer of an order placed here. */
  kind: 'webhook' | 'webhook-without-header' | 'create';
}

const orderPlan: fc.Arbitrary<OrderPlan> = fc.record({
  suffix: fc.constantFrom(...(Object.keys(TIMELINES) as Suffix[])),
  placedHere: fc.boolean(),
  arrives: fc.array(
    fc.integer({ min: 0, max: 4 }).map((n) => n > 0),
    { minLength: 3, maxLength: 3 },
  ),
  duplicates: fc.array(fc.record({ step: fc.nat(2), withoutHeader: fc.boolean() }), { maxLength: 3 }),
});

/** Several orders, and every delivery of all of them in one arbitrary order. */
const scenario = fc.array(orderPlan, { minLength: 1, maxLength: 4 }).chain((plans) => {
  const deliveries: Delivery[] = [];
  plans.forEach((plan, order) => {
    const steps = TIMELINES[plan.suffix].length;
    const arrived = plan.arrives.slice(0, steps).flatMap((arrives, step) => (arrives ? [step] : []));
    if (arrived.length === 0) arrived.push(steps - 1);
    for (const step of arrived) deliveries.push({ order, step, kind: 'webhook' });
    for (const { step, withoutHeader } of plan.duplicates) {
      if (arrived.includes(step)) {
        deliveries.push({ order, step, kind: withoutHeader ? 'webhook-without-header' : 'webhook' });
      }
    }
    if (plan.placedHere) deliveries.push({ order, step: 0, kind: 'create' });
  });
  return fc
    .shuffledSubarray(deliveries, { minLength: deliveries.length, maxLength: deliveries.length })
    .map((shuffled) => ({ plans, deliveries: shuffled }));
});

/** The expected order: the latest step of its life that arrived (the create answer is step 0). */
function expectedOrder(life: Order[], deliveries: Delivery[], order: number): Order {
  const latest = Math.max(...deliveries.filter((d) => d.order === order).map((d) => d.step));
  return life[latest]!;
}

const FIELDS = ['status', 'serial_number', 'success_at', 'message', 'amount', 'invoice_number'] as const;

async function assertOrderIs(store: OrderStore, ref: string, expected: Order): Promise<void> {
  const local = await store.queries.getOrder(ref);
  assert.ok(local, `${ref} exists`);
  const actual = {
    status: local.status,
    serial_number: local.serialNumber,
    success_at: local.successAt,
    message: local.message,
    amount: local.amount,
    invoice_number: local.invoiceNumber,
  };
  assert.deepEqual(actual, Object.fromEntries(FIELDS.map((f) => [f, expected[f] ?? null])), ref);
}

let runs = 0;

/** A scenario made concrete: refs and event ids unique to this run. */
function concrete({ plans }: { plans: OrderPlan[] }) {
  runs += 1;
  const refs = plans.map((_, i) => `p${runs}-${i}`);
  const lives = plans.map((plan, i) => lifeOf(refs[i]!, plan.suffix));
  const eventId = (d: Delivery) => `evt_${refs[d.order]}_${d.step}`;
  const body = (d: Delivery) => webhookBodyOf(lives[d.order]![d.step]!, eventId(d));
  return { refs, lives, eventId, body };
}

test('through the queue and the worker, any interleaving, duplication and reordering of several orders’ events ends in each order’s latest arrived state', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  const producer = await testProducer(t, redis.url);
  await startTestWorker(t, { redisUrl: redis.url, dbPath });
  const store = await openTestStore(dbPath); // the placing process: its own connection to the file
  t.after(() => store.close());
  let jobs = 0;

  await fc.assert(
    fc.asyncProperty(scenario, async (generated) => {
      const { refs, lives, eventId, body } = concrete(generated);
      for (const [i, plan] of generated.plans.entries()) {
        if (plan.placedHere)
          await store.writer.createLocalOrder({ partnerRef: refs[i]!, productCode: 'ML86', data: {} });
      }
      const queued = new Set<string>();
      for (const d of generated.deliveries) {
        if (d.kind === 'create') {
          await store.writer.applyOrderSnapshot(lives[d.order]![0]!, { source: 'create' });
        } else {
          queued.add(await queueWebhook(producer, body(d), d.kind === 'webhook' ? eventId(d) : null));
        }
      }
      jobs += queued.size;
      await waitFor(
        async () => {
          const counts = await producer.webhookQueue.getJobCounts('completed', 'failed');
          assert.equal(counts.failed, 0);
          return counts.completed === jobs;
        },
        { message: `${jobs} jobs completed` },
      );
      for (const i of generated.plans.keys()) {
        await assertOrderIs(store, refs[i]!, expectedOrder(lives[i]!, generated.deliveries, i));
      }
    }),
    { numRuns: 30 },
  );
});

describeEachBackend('interleavings through group commit', (backend) => {
  test('through the worker’s apply path, any split of any interleaving into group commits ends in each order’s latest arrived state', async (t) => {
    const { store } = await backend.tempStore(t, { now: Date.now });
    const groupCommit = applyCommit(store.writer);

    await fc.assert(
      fc.asyncProperty(
        scenario,
        fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1 }),
        async (generated, sizes) => {
          const { refs, lives, eventId, body } = concrete(generated);
          for (const [i, plan] of generated.plans.entries()) {
            if (plan.placedHere)
              await store.writer.createLocalOrder({ partnerRef: refs[i]!, productCode: 'ML86', data: {} });
          }
          // Without the queue in front, a redelivery with the same event id reaches the store,
          // which records it once: its (source, event id) dedupe.
          const pending = [...generated.deliveries];
          for (let batch = 0; pending.length > 0; batch++) {
            const group = pending.splice(0, sizes[batch % sizes.length]);
            await Promise.all(
              group.map((d) => {
                if (d.kind === 'create') {
                  return groupCommit.submit({ snapshot: lives[d.order]![0]!, options: { source: 'create' } });
                }
                const id = d.kind === 'webhook' ? eventId(d) : null;
                const rawBody = body(d);
                const data: WebhookJobData = {
                  dedupeKey: webhookIdentity(rawBody).dedupeKey,
                  eventId: id,
                  ...encodeWebhookRawBody(rawBody),
                  receivedAt: Date.now(),
                  headers: { timestamp: Math.floor(Date.now() / 1000) },
                };
                return applyWebhookJob(data, groupCommit);
              }),
            );
          }
          for (const i of generated.plans.keys()) {
            await assertOrderIs(store, refs[i]!, expectedOrder(lives[i]!, generated.deliveries, i));
            const webhookIds = (await store.queries.listEvents(refs[i]!))
              .filter((e) => e.source === 'webhook' && e.eventId?.startsWith('evt_'))
              .map((e) => e.eventId);
            assert.equal(new Set(webhookIds).size, webhookIds.length, 'each event id recorded once');
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});
