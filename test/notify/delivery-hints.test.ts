import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DeliveryHints, ENDPOINT_FRESH_MS } from '../../src/notify/delivery-hints.js';
import type { FeedEvent } from '../../src/store/feed.js';
import type { NotifyEndpoint } from '../../src/store/notify-endpoints.js';

// What the dispatcher hands to a delivery's first run instead of the store's reads
// (src/notify/delivery-hints.ts): each hint is certain or absent, never a guess.

function endpoint(id: number, events: string[] = ['*'], fromSeq = 0): NotifyEndpoint {
  return { id, events, fromSeq } as unknown as NotifyEndpoint;
}

/** An event of order `ref` at `version` (type order.updated unless given). */
function orderEvent(seq: number, ref: string, version: number, type = 'order.updated'): FeedEvent {
  return {
    seq,
    type,
    timestamp: new Date(0).toISOString(),
    data: { partner_ref: ref, version },
  } as unknown as FeedEvent;
}

/** The order's previous event as the store's read answers it (deliver-notification.ts): the truth. */
function previousInFeed(feed: FeedEvent[], event: FeedEvent, { events = ['*'], fromSeq = 0 } = {}) {
  const ref = (event.data as { partner_ref: string }).partner_ref;
  const earlier = feed.filter(
    (e) =>
      (e.data as { partner_ref?: string }).partner_ref === ref &&
      e.seq > fromSeq &&
      e.seq < event.seq &&
      (events.includes('*') || events.includes(e.type)),
  );
  return earlier.at(-1)?.seq ?? null;
}

test("the order's previous event is known from the versions the dispatcher read, and agrees with the feed", () => {
  const feed = [
    orderEvent(1, 'A', 1, 'order.submitted'),
    orderEvent(2, 'B', 1, 'order.submitted'),
    orderEvent(3, 'A', 2),
    orderEvent(4, 'A', 3),
    orderEvent(5, 'B', 2),
  ];
  const hints = new DeliveryHints();
  // Two passes, the second reading on from the first's cursor.
  hints.dispatched(endpoint(1), feed.slice(0, 3), feed.slice(0, 3));
  hints.dispatched(endpoint(1), feed.slice(3), feed.slice(3));
  for (const event of feed) {
    assert.equal(hints.take(1, event.seq)?.previous, previousInFeed(feed, event), `event ${event.seq}`);
  }
  assert.equal(hints.take(1, 3), undefined, 'a hint is taken once');
});

test('a previous event the dispatcher did not read, or one the endpoint does not want, is left to the store', () => {
  const feed = [orderEvent(1, 'A', 1, 'order.submitted'), orderEvent(2, 'A', 2), orderEvent(3, 'A', 3)];
  // A process started after event 1: it reads from cursor 1.
  const late = new DeliveryHints();
  late.dispatched(endpoint(1), feed.slice(1), feed.slice(1));
  assert.equal(late.take(1, 2)?.previous, undefined, 'version 2, version 1 never read: unknown');
  assert.equal(late.take(1, 3)?.previous, 2);

  // An endpoint that wants only order.updated: event 2's earlier one is not wanted, so the hint
  // cannot tell whether an even earlier one is; event 3's is 2.
  const filtered = new DeliveryHints();
  const wanted = feed.filter((e) => e.type === 'order.updated');
  filtered.dispatched(endpoint(2, ['order.updated']), feed, wanted);
  assert.equal(filtered.take(2, 1), undefined, 'no hint for an event the endpoint does not want');
  assert.equal(filtered.take(2, 2)?.previous, undefined);
  assert.equal(filtered.take(2, 3)?.previous, previousInFeed(feed, feed[2]!, { events: ['order.updated'] }));

  // An endpoint added after event 1 (its start, fromSeq 1): event 2 has no earlier event for it.
  const added = new DeliveryHints();
  added.dispatched(endpoint(3, ['*'], 1), feed, feed.slice(1));
  assert.equal(added.take(3, 2)?.previous, null);
  assert.equal(added.take(3, 2), undefined);

  // Versions that do not follow (a gap): unknown, never a wrong answer.
  const gap = new DeliveryHints();
  gap.dispatched(endpoint(1), [feed[0]!, orderEvent(4, 'A', 3)], [feed[0]!, orderEvent(4, 'A', 3)]);
  assert.equal(gap.take(1, 4)?.previous, undefined);
});

test('events of no order have no previous event; another endpoint reading behind still gets exact hints', () => {
  const price = { seq: 7, type: 'product.price_changed', timestamp: '', data: {} } as unknown as FeedEvent;
  const feed = [
    orderEvent(5, 'A', 1, 'order.submitted'),
    orderEvent(6, 'A', 2),
    price,
    orderEvent(8, 'A', 3),
  ];
  const hints = new DeliveryHints();
  hints.dispatched(endpoint(1), feed, feed);
  assert.equal(hints.take(1, 7)?.previous, null);
  // Endpoint 2 reads the same events in its own pass, after endpoint 1 has read further.
  hints.dispatched(endpoint(2), feed.slice(0, 2), feed.slice(0, 2));
  hints.dispatched(endpoint(2), feed.slice(2), feed.slice(2));
  assert.equal(hints.take(2, 6)?.previous, 5);
  assert.equal(hints.take(2, 8)?.previous, 6);
});

test("the endpoint is the dispatcher's recent read of an enabled one, forgotten when this process changes it", () => {
  let now = 0;
  const hints = new DeliveryHints({ now: () => now });
  hints.endpointsRead([endpoint(1)], hints.mark());
  assert.equal(hints.endpoint(1)?.id, 1);
  assert.equal(hints.endpoint(2), undefined, 'not enabled at the last pass: read from the store');
  now = ENDPOINT_FRESH_MS + 1;
  assert.equal(hints.endpoint(1), undefined, 'the last pass is too old: read from the store');
  hints.endpointsRead([endpoint(1)], hints.mark());
  hints.forgetEndpoint(1);
  assert.equal(hints.endpoint(1), undefined);

  // A 410 disables endpoint 2 while a pass is reading the endpoints: the pass's read may predate
  // the disable, so it does not bring endpoint 2 back; the next pass's read is after it.
  const mark = hints.mark();
  hints.forgetEndpoint(2);
  hints.endpointsRead([endpoint(1), endpoint(2)], mark);
  assert.equal(hints.endpoint(2), undefined);
  assert.equal(hints.endpoint(1)?.id, 1);
  hints.endpointsRead([endpoint(2)], hints.mark());
  assert.equal(hints.endpoint(2)?.id, 2, 'enabled again and read after the disable');
});

test('hints are bounded: the oldest go first; settled events are remembered per endpoint', () => {
  const hints = new DeliveryHints({ max: 2 });
  const feed = [1, 2, 3].map((seq) => orderEvent(seq, `R${seq}`, 1));
  hints.dispatched(endpoint(1), feed, feed);
  assert.equal(hints.take(1, 1), undefined);
  assert.equal(hints.take(1, 3)?.event.seq, 3);

  hints.settled(1, 10);
  assert.equal(hints.isSettled(1, 10), true);
  assert.equal(hints.isSettled(2, 10), false);
  for (let seq = 11; seq < 20; seq++) hints.settled(1, seq);
  assert.equal(hints.isSettled(1, 10), false, 'forgotten past the bound: the store is asked');
});
