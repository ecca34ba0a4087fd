import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DEMO_MEMBERS,
  fixtureMember,
  startSimulator,
  type TestSimulator,
  userIdEndingIn,
} from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';
import {
  failFirst,
  hangFirst,
  isValidSignature,
  startWebhookSink,
  type WebhookDelivery,
  type WebhookSink,
  type WebhookSinkOptions,
} from '../helpers/webhook-sink.js';

const DEMO_SECRET = 'sim_secret_demo_M0001';
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;
/** decisions.md: retries after 1 min, 5 min, 30 min, 2 h and 6 h. */
const RETRY_SCHEDULE_MS = [60_000, 300_000, 1_800_000, 7_200_000, 21_600_000];

/** A user id whose order goes PENDING → SUCCESS with a serial: one webhook. */
const ONE_EVENT = { user_id: userIdEndingIn('4321'), server_id: '2001' };
/** A user id whose order goes PENDING → PROCESSING → SUCCESS: two webhooks. */
const TWO_EVENTS = { user_id: userIdEndingIn('0003'), server_id: '2001' };

interface AttemptRecord {
  event_id: string;
  partner_ref: string;
  invoice_number: string;
  status: string;
  url: string | null;
  attempt: number;
  answer_status: number | null;
  error: string | null;
  at: string;
  faults?: string[];
  next_attempt_in_ms: number | null;
}

async function setup(
  t: Parameters<typeof startSimulator>[0],
  {
    sink: sinkOptions = {},
    ...simOptions
  }: Parameters<typeof startSimulator>[1] & { sink?: Partial<WebhookSinkOptions> } = {},
): Promise<{ harness: TestSimulator; sink: WebhookSink }> {
  const sink = await startWebhookSink(t, { secrets: [DEMO_SECRET], ...sinkOptions });
  const harness = await startSimulator(t, { webhookUrl: sink.url, ...simOptions });
  return { harness, sink };
}

async function attemptsFor(harness: TestSimulator, partnerRef: string): Promise<AttemptRecord[]> {
  const log = (await harness.control('/webhooks')).body as AttemptRecord[];
  return log.filter((r) => r.partner_ref === partnerRef);
}

/** The attempts for `partnerRef` once `count` are recorded (a record follows its delivery's answer). */
function recordedAttempts(
  harness: TestSimulator,
  partnerRef: string,
  count: number,
): Promise<AttemptRecord[]> {
  return waitFor(
    async () => {
      const records = await attemptsFor(harness, partnerRef);
      return records.length >= count ? records : undefined;
    },
    { message: `${count} recorded attempts for ${partnerRef}` },
  );
}

function forRef(ref: string): (d: WebhookDelivery) => boolean {
  return (d) => d.body?.data?.partner_ref === ref;
}

describe('webhook delivery', () => {
  test('a webhook carries X-Timestamp, X-Signature, X-Event-Id and X-Event-Type, signed over the raw body with the member secret', async (t) => {
    const { harness, sink } = await setup(t);

    const created = await harness.createOrder({ data: ONE_EVENT });
    const [delivery] = await sink.waitForDeliveries(forRef(created.body.partner_ref));

    assert.ok(delivery);
    assert.equal(delivery.method, 'POST');
    assert.match(String(delivery.headers['content-type']), /^application\/json/);
    assert.match(delivery.timestamp ?? '', /^[0-9]+$/);
    assert.ok(Math.abs(Number(delivery.timestamp) - Date.now() / 1000) < 30, 'timestamp is now, in seconds');
    assert.match(delivery.signature ?? '', /^[0-9a-f]{64}$/, 'lowercase hex SHA-256');
    assert.equal(delivery.signatureValid, true);
    assert.equal(
      isValidSignature('sim_secret_remote_M0002', delivery.timestamp, delivery.signature, delivery.rawBody),
      false,
      'another secret does not verify it',
    );
    assert.equal(delivery.eventType, 'order.updated');
    assert.equal(delivery.eventId, delivery.body?.event_id);
  });

  test('the body is {event_id, event, created_at, data} and data is the order exactly as GET returns it', async (t) => {
    const { harness, sink } = await setup(t);

    const created = await harness.createOrder({ data: ONE_EVENT });
    const [delivery] = await sink.waitForDeliveries(forRef(created.body.partner_ref));
    const order = await harness.getOrder(created.body.partner_ref);

    assert.ok(delivery?.body);
    assert.deepEqual(Object.keys(delivery.body).sort(), ['created_at', 'data', 'event', 'event_id']);
    assert.equal(delivery.body.event, 'order.updated');
    assert.equal(typeof delivery.body.event_id, 'string');
    assert.match(String(delivery.body.created_at), ISO_UTC);
    assert.equal(delivery.body.data?.status, 'SUCCESS');
    assert.deepEqual(delivery.body.data, order.body);
  });

  test('no webhook is sent for the creation itself, only for later state changes', async (t) => {
    const { harness, sink } = await setup(t);

    const parked = await harness.createOrder({
      data: { user_id: userIdEndingIn('0007'), server_id: '2001' },
    });
    const moving = await harness.createOrder({ data: ONE_EVENT });
    await sink.waitForDeliveries(forRef(moving.body.partner_ref));

    assert.equal(sink.forRef(parked.body.partner_ref).length, 0);
    assert.ok(sink.deliveries.every((d) => d.body?.data?.status !== 'PENDING'));
  });

  test('a non-ASCII partner_ref is sent as UTF-8 and the signature covers those exact bytes', async (t) => {
    const { harness, sink } = await setup(t);
    const ref = 'pesanan/ü 日本-1';

    await harness.createOrder({ partner_ref: ref, data: ONE_EVENT });
    const [delivery] = await sink.waitForDeliveries(forRef(ref));

    assert.ok(delivery);
    assert.ok(delivery.rawBody.includes(Buffer.from('日本', 'utf8')), 'raw UTF-8, not \\u escapes');
    assert.equal(delivery.signatureValid, true);
  });

  test("callback_url receives the order's webhooks instead of the member's default URL", async (t) => {
    const { harness, sink: memberDefault } = await setup(t);
    const callback = await startWebhookSink(t, { secrets: [DEMO_SECRET] });

    const withCallback = await harness.createOrder({ data: ONE_EVENT, callback_url: callback.url });
    const withoutCallback = await harness.createOrder({ data: ONE_EVENT });
    await callback.waitForDeliveries(forRef(withCallback.body.partner_ref));
    await memberDefault.waitForDeliveries(forRef(withoutCallback.body.partner_ref));

    assert.equal(memberDefault.forRef(withCallback.body.partner_ref).length, 0);
    assert.equal(callback.forRef(withoutCallback.body.partner_ref).length, 0);
    assert.equal(callback.deliveries[0]?.signatureValid, true);
  });

  test("each member's webhooks are signed with that member's own secret", async (t) => {
    const { harness } = await setup(t);
    const second = fixtureMember(harness.fixture, DEMO_MEMBERS.memberRole);
    const sink = await startWebhookSink(t, { secrets: [second.api_secret] });

    const created = await harness.createOrder(
      { data: ONE_EVENT, callback_url: sink.url },
      { key: second.api_key },
    );
    const [delivery] = await sink.waitForDeliveries(forRef(created.body.partner_ref));

    assert.equal(delivery?.signatureValid, true);
    assert.equal(
      isValidSignature(DEMO_SECRET, delivery?.timestamp, delivery?.signature, delivery!.rawBody),
      false,
    );
  });

  test('every delivery attempt is listed by GET /__sim/webhooks with its answer', async (t) => {
    const { harness, sink } = await setup(t);

    const created = await harness.createOrder({ data: TWO_EVENTS });
    const deliveries = await sink.waitForDeliveries(forRef(created.body.partner_ref), 2);
    const log = await recordedAttempts(harness, created.body.partner_ref, 2);

    assert.deepEqual(
      log.map((r) => [r.event_id, r.status, r.url, r.attempt, r.answer_status, r.error]).sort(),
      deliveries.map((d) => [d.eventId, d.body?.data?.status, sink.url, 1, 200, null]).sort(),
    );
    for (const record of log) {
      assert.equal(record.invoice_number, created.body.invoice_number);
      assert.match(record.at, ISO_UTC);
    }
  });
});

describe('webhook retries', () => {
  test('a non-2xx answer is retried with the same event id and body, up to 5 retries on the time-scaled schedule, each attempt freshly signed', async (t) => {
    const timeScale = 0.0001;
    const { harness, sink } = await setup(t, { timeScale, sink: { answer: () => 500 } });

    const created = await harness.createOrder({ data: ONE_EVENT });
    const attempts = await sink.waitForDeliveries(forRef(created.body.partner_ref), 6, { timeoutMs: 15_000 });

    assert.equal(new Set(attempts.map((a) => a.eventId)).size, 1, 'one event id');
    assert.ok(
      attempts.every((a) => a.rawBody.equals(attempts[0]!.rawBody)),
      'the same body bytes',
    );
    assert.ok(
      attempts.every((a) => a.signatureValid),
      'every attempt verifies with its own timestamp',
    );
    const timestamps = attempts.map((a) => Number(a.timestamp));
    assert.ok(
      timestamps.every((ts, i) => i === 0 || ts >= timestamps[i - 1]!),
      'timestamps never go back',
    );
    assert.ok(timestamps.at(-1)! > timestamps[0]!, 'the last attempt (3 s later) carries a newer timestamp');
    assert.notEqual(attempts.at(-1)!.signature, attempts[0]!.signature, 'and a new signature');
    attempts.slice(1).forEach((attempt, i) => {
      const gap = attempt.receivedAt - attempts[i]!.receivedAt;
      const scheduled = RETRY_SCHEDULE_MS[i]! * timeScale;
      assert.ok(gap >= scheduled * 0.9 - 3, `retry ${i + 1} after ${gap} ms, scheduled ${scheduled} ms`);
    });

    const log = await recordedAttempts(harness, created.body.partner_ref, 6);
    // Each attempt records the retry it scheduled: the schedule scaled, and none after the 6th.
    assert.deepEqual(
      log.map((r) => [r.attempt, r.answer_status, r.next_attempt_in_ms]),
      [1, 2, 3, 4, 5, 6].map((n) => [n, 500, n < 6 ? RETRY_SCHEDULE_MS[n - 1]! * timeScale : null]),
    );
    assert.equal(sink.forRef(created.body.partner_ref).length, 6);
  });

  test('a 2xx after failed attempts ends the retries', async (t) => {
    const timeScale = 0.0001;
    const { harness, sink } = await setup(t, { timeScale, sink: { answer: failFirst(2, 503) } });

    const created = await harness.createOrder({ data: ONE_EVENT });
    await sink.waitForDeliveries(forRef(created.body.partner_ref), 3);
    const log = await recordedAttempts(harness, created.body.partner_ref, 3);

    assert.deepEqual(
      log.map((r) => [r.attempt, r.answer_status, r.next_attempt_in_ms]),
      [
        [1, 503, RETRY_SCHEDULE_MS[0]! * timeScale],
        [2, 503, RETRY_SCHEDULE_MS[1]! * timeScale],
        [3, 200, null],
      ],
    );
    assert.equal(sink.forRef(created.body.partner_ref).length, 3);
  });

  test('no answer within webhookTimeoutMs counts as a failed attempt and is retried', async (t) => {
    const { harness, sink } = await setup(t, { webhookTimeoutMs: 300, sink: { answer: hangFirst(1) } });

    const created = await harness.createOrder({ data: ONE_EVENT });
    const attempts = await sink.waitForDeliveries(forRef(created.body.partner_ref), 2);
    const log = await recordedAttempts(harness, created.body.partner_ref, 2);

    assert.equal(attempts[0]?.eventId, attempts[1]?.eventId);
    assert.equal(attempts[0]?.answer, 'hang');
    assert.equal(log[0]?.answer_status, null);
    assert.equal(typeof log[0]?.error, 'string');
    assert.equal(log[1]?.answer_status, 200);
    assert.equal(log[1]?.attempt, 2);
  });

  test('an unreachable webhook URL is retried like a non-2xx answer', async (t) => {
    const { harness } = await setup(t, { timeScale: 0.0001 });
    const closed = await startWebhookSink(t, { secrets: [DEMO_SECRET] });
    const unreachable = closed.url;
    await closed.close();

    const created = await harness.createOrder({ data: ONE_EVENT, callback_url: unreachable });
    const log = await waitFor(
      async () => {
        const records = await attemptsFor(harness, created.body.partner_ref);
        return records.length >= 3 ? records : undefined;
      },
      { message: '3 attempts to an unreachable URL' },
    );

    assert.deepEqual(
      log.slice(0, 3).map((r) => [r.attempt, r.url, r.answer_status]),
      [1, 2, 3].map((n) => [n, unreachable, null]),
    );
    assert.ok(log.every((r) => typeof r.error === 'string' && r.error.length > 0));
  });
});

describe('webhook faults', () => {
  test('webhook_drop 1: events are not sent, are logged as dropped, and the order still progresses', async (t) => {
    const { harness, sink } = await setup(t);
    await harness.setFaults({ webhook_drop: 1 });

    const created = await harness.createOrder({ data: TWO_EVENTS });
    const log = await recordedAttempts(harness, created.body.partner_ref, 2);

    // A lost event is not retried: its attempt schedules no next one.
    assert.deepEqual(
      log.map((r) => [r.status, r.attempt, r.answer_status, r.error, r.next_attempt_in_ms]).sort(),
      [
        ['PROCESSING', 1, null, 'dropped', null],
        ['SUCCESS', 1, null, 'dropped', null],
      ],
    );
    assert.equal((await harness.getOrder(created.body.partner_ref)).body.status, 'SUCCESS');
    assert.equal(sink.forRef(created.body.partner_ref).length, 0);
  });

  test('webhook_duplicate 1: every event arrives twice, byte for byte, with one event id', async (t) => {
    const { harness, sink } = await setup(t);
    await harness.setFaults({ webhook_duplicate: 1 });

    const created = await harness.createOrder({ data: ONE_EVENT });
    const copies = await sink.waitForDeliveries(forRef(created.body.partner_ref), 2);

    assert.equal(copies[0]?.eventId, copies[1]?.eventId);
    assert.ok(copies[0]?.rawBody.equals(copies[1]!.rawBody));
    assert.ok(copies.every((c) => c.signatureValid));
  });

  test('webhook_bad_signature 1: the signature does not verify with the member secret', async (t) => {
    const { harness, sink } = await setup(t);
    await harness.setFaults({ webhook_bad_signature: 1 });

    const created = await harness.createOrder({ data: ONE_EVENT });
    const [delivery] = await sink.waitForDeliveries(forRef(created.body.partner_ref));

    assert.match(delivery?.signature ?? '', /^[0-9a-f]{64}$/, 'still well-formed');
    assert.equal(delivery?.signatureValid, false);
  });

  test('webhook_stale_timestamp 1: correctly signed, but the timestamp is beyond the 300 s tolerance', async (t) => {
    const { harness, sink } = await setup(t);
    await harness.setFaults({ webhook_stale_timestamp: 1 });

    const created = await harness.createOrder({ data: ONE_EVENT });
    const [delivery] = await sink.waitForDeliveries(forRef(created.body.partner_ref));

    assert.equal(delivery?.signatureValid, true);
    const age = Date.now() / 1000 - Number(delivery?.timestamp);
    assert.ok(age > 300 && age < 3_600, `timestamp ${age} s old`);
  });

  test('webhook_reorder 1: the newer event of an order is delivered before the older one', async (t) => {
    const { harness, sink } = await setup(t, { timeScale: 0.01 });
    await harness.setFaults({ webhook_reorder: 1 });

    const created = await harness.createOrder({ data: TWO_EVENTS });
    const deliveries = await sink.waitForDeliveries(forRef(created.body.partner_ref), 2);

    assert.deepEqual(
      deliveries.map((d) => d.body?.data?.status),
      ['SUCCESS', 'PROCESSING'],
    );
    assert.ok(deliveries.every((d) => d.signatureValid));
  });

  test('webhook_reorder 1: an event with no newer one to wait for is still delivered', async (t) => {
    const { harness, sink } = await setup(t);
    await harness.setFaults({ webhook_reorder: 1 });

    const created = await harness.createOrder({ data: ONE_EVENT });
    const [delivery] = await sink.waitForDeliveries(forRef(created.body.partner_ref));

    assert.equal(delivery?.body?.data?.status, 'SUCCESS');
  });

  test('webhook_delay_ms: each delivery arrives at least that long after its event was created', async (t) => {
    const { harness, sink } = await setup(t);
    await harness.setFaults({ webhook_delay_ms: 300 });

    const created = await harness.createOrder({ data: ONE_EVENT });
    const [delivery] = await sink.waitForDeliveries(forRef(created.body.partner_ref));

    const late = delivery!.receivedAt - Date.parse(String(delivery?.body?.created_at));
    assert.ok(late >= 295, `arrived ${late} ms after the event`);
  });
});
