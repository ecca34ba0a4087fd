// The server's zone for this whole file (its own process): Node reads TZ again when it is set.
process.env.TZ = 'Asia/Jakarta';

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { GROWTH } from '../../src/domain/pace-math.js';
import { pollBaseOf } from '../../src/domain/poll-rules.js';
import { learnPace } from '../../src/reconciler/learn-pace.js';
import { createReconcilerMetrics } from '../../src/reconciler/metrics.js';
import type { LocalOrder } from '../../src/store/local-order.js';
import { parseUpstreamTime } from '../../src/upstream/upstream-time.js';
import { readWebhookJob } from '../../src/worker/webhook-event.js';
import { snapshot, tempStore } from '../helpers/store.js';

const CREATED = Date.UTC(2026, 10, 1, 0, 0, 0);

/** A webhook job as the receiver queues it. */
function webhookJob(body: { event_id: string; [field: string]: unknown }, receivedAt: number) {
  return {
    rawBody: JSON.stringify(body),
    rawBodyEncoding: 'utf8',
    dedupeKey: body.event_id,
    eventId: null,
    receivedAt,
  };
}

describe('upstream times mean the same instant on a server in Asia/Jakarta (UTC+7) as in UTC', () => {
  test('the zone is in force: Date.parse would read an offset-less time 7 hours early', () => {
    assert.equal(new Date(CREATED).getTimezoneOffset(), -420);
    assert.equal(Date.parse('2026-11-01T00:00:00'), CREATED - 7 * 3_600_000);
    assert.equal(parseUpstreamTime('2026-11-01T00:00:00'), CREATED);
  });

  test('the pace learned from a webhook is the order’s real duration, whether the event’s or the order’s created_at lacks an offset', async (t) => {
    const { store } = await tempStore(t, { paceMinSamples: 3, firstPollQuantile: 0.5 });
    // FAILED is reached at the event's time, SUCCESS at the order's success_at: 10 s after creation.
    const cases = [
      { ref: 'EVENT-LOCAL', eventAt: '2026-11-01T00:00:10', createdAt: '2026-11-01T00:00:00Z' },
      { ref: 'ORDER-LOCAL', eventAt: '2026-11-01T00:00:10Z', createdAt: '2026-11-01T00:00:00' },
      {
        ref: 'SUCCESS-LOCAL',
        eventAt: '2026-11-01T00:00:10Z',
        createdAt: '2026-11-01T00:00:00Z',
        successAt: '2026-11-01T00:00:10',
      },
    ];
    for (const { ref, eventAt, createdAt, successAt } of cases) {
      const order = successAt
        ? snapshot(ref, 'SUCCESS', { created_at: createdAt, success_at: successAt, serial_number: 'SN' })
        : snapshot(ref, 'FAILED', { created_at: createdAt });
      const event = readWebhookJob(
        webhookJob(
          { event_id: ref, event: 'order.updated', created_at: eventAt, data: order },
          CREATED + 12_000,
        ),
      );
      assert.equal(event.options.occurredAt, CREATED + 10_000, ref);
      await store.writer.applyOrderSnapshot(event.order, event.options);
    }

    const pace = (await learnPace(store.pollPlans, 'default', store.claims.settings)).get('ML86');

    assert.ok(pace, 'three samples learned');
    assert.equal(pace.samples, 3);
    assert.ok(
      pace.finalMs >= 10_000 && pace.finalMs <= 10_000 * GROWTH,
      `learned ${pace.finalMs} ms from creation to FAILED; each took 10 s`,
    );
  });

  test('the first poll counts from the upstream’s offset-less created_at read as UTC', () => {
    const row = { local_created_at: CREATED - 60_000, created_at: '2026-11-01T00:00:00' };

    assert.equal(pollBaseOf(row, CREATED + 3_600_000), CREATED);
  });

  test('the time to final of an order with an offset-less created_at is measured from it as UTC', async () => {
    const metrics = createReconcilerMetrics();
    const order = {
      finalAt: CREATED + 30_000,
      createdAt: '2026-11-01T00:00:00',
      localCreatedAt: CREATED - 5_000,
    };

    metrics.observeTimeToFinal(order as LocalOrder, 'poll');

    const histogram = await metrics.registry.getSingleMetric('h2h_order_time_to_final_seconds')!.get();
    const sum = histogram.values.find(
      (v) => 'metricName' in v && v.metricName === 'h2h_order_time_to_final_seconds_sum',
    );
    assert.equal(sum?.value, 30);
  });
});
