import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Order } from '../../src/upstream/model.js';
import { snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

function* permutations<T>(items: readonly T[]): Generator<T[]> {
  if (items.length <= 1) {
    yield [...items];
    return;
  }
  for (let i = 0; i < items.length; i++) {
    const rest = [...items.slice(0, i), ...items.slice(i + 1)];
    for (const tail of permutations(rest)) yield [items[i]!, ...tail];
  }
}

/** Each timeline is the order as GET /orders/:ref returns it at each state change. */
const SERIAL = { serial_number: 'SN-777' };
const TIMELINES: Record<string, (ref: string) => Order[]> = {
  'delivered with a late serial, then refunded': (ref) => [
    snapshot(ref, 'PENDING'),
    snapshot(ref, 'PROCESSING'),
    snapshot(ref, 'SUCCESS'),
    snapshot(ref, 'SUCCESS', SERIAL),
    snapshot(ref, 'REFUNDED', SERIAL),
  ],
  'delivered with a late serial': (ref) => [
    snapshot(ref, 'PENDING'),
    snapshot(ref, 'PROCESSING'),
    snapshot(ref, 'SUCCESS'),
    snapshot(ref, 'SUCCESS', SERIAL),
  ],
  failed: (ref) => [snapshot(ref, 'PENDING'), snapshot(ref, 'PROCESSING'), snapshot(ref, 'FAILED')],
};

describeEachBackend('snapshots out of order', (backend) => {
  for (const [name, timeline] of Object.entries(TIMELINES)) {
    test(`every delivery order of the events of a timeline (${name}) ends in the same final state`, async (t) => {
      const { store } = await backend.tempStore(t);
      const events = timeline('IN-ORDER').map((_, i) => i);
      const settledRefs: string[] = [];
      let run = 0;
      for (const order of permutations(events)) {
        const ref = `P${run++}`;
        const snapshots = timeline(ref);
        for (const i of order) {
          await store.writer.applyOrderSnapshot(snapshots[i]!, { source: 'webhook', eventId: `${ref}-${i}` });
        }
        settledRefs.push(ref);
      }
      const inOrder = timeline('IN-ORDER');
      for (const [i, s] of inOrder.entries())
        await store.writer.applyOrderSnapshot(s, { source: 'webhook', eventId: `io-${i}` });

      // The version counts the changes a delivery order made (a skipped state is one change
      // fewer); everything else must be equal.
      const expected = {
        ...(await store.queries.getOrder('IN-ORDER'))!,
        id: 0,
        partnerRef: '',
        shopRef: '',
        invoiceNumber: '',
        version: 0,
      };
      for (const ref of settledRefs) {
        assert.deepEqual(
          {
            ...(await store.queries.getOrder(ref))!,
            id: 0,
            partnerRef: '',
            shopRef: '',
            invoiceNumber: '',
            version: 0,
          },
          expected,
          ref,
        );
        assert.equal((await store.queries.listEvents(ref)).length, events.length, ref);
      }
      assert.equal(expected.status, inOrder.at(-1)!.status);
      assert.equal(expected.nextPollAt, null);
    });
  }
});
