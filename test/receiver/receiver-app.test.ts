import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { pollRequestJobId } from '../../src/queue/poll-request-queue.js';
import { decodeWebhookRawBody, webhookIdentity } from '../../src/queue/webhook-queue.js';
import { signedWebhookHeaders } from '../../src/upstream/signature.js';
import { capturedLogger } from '../helpers/logs.js';
import {
  deliveryHeaders,
  freezableProxy,
  SECRET,
  startTestReceiver,
  webhookBody,
} from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const nowS = () => Math.floor(Date.now() / 1000);

describe('POST /webhooks/h2h: valid deliveries', () => {
  test('a validly signed webhook is answered 200 only once its job, with the exact bytes, is in Redis', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    const body = webhookBody('order-1', 'evt_one');
    const headers = deliveryHeaders(body);

    const res = await post(body, headers);

    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { received: true, duplicate: false });
    const job = await producer.webhookQueue.getJob('ev-evt_one');
    assert.ok(job, 'the job is in Redis when the 200 arrives');
    assert.equal(job.data.dedupeKey, 'event-id:evt_one');
    assert.equal(job.data.eventId, 'evt_one');
    assert.equal(job.data.headerEventId, 'evt_one');
    assert.equal(job.name, 'order-1 SUCCESS', 'Bull Board shows the order and its status');
    assert.equal(decodeWebhookRawBody(job.data).toString('utf8'), body);
    assert.equal(job.data.headers.timestamp, Number(headers['x-timestamp']));
    assert.equal(job.data.headers.eventType, 'order.updated');
    assert.equal(job.opts.attempts, 10);
  });

  test('the raw bytes are verified: unusual whitespace, key order and unicode escapes pass as sent', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    const body =
      '{ "data" :{"status":"SUCCESS" , "partner_ref":"caf\\u00e9-1"},\n\t"event":"order.updated", "event_id":"evt_raw" }';
    const reserialised = JSON.stringify(JSON.parse(body));
    assert.notEqual(reserialised, body);
    const headers = deliveryHeaders(body);

    const asSent = await post(body, headers);
    const asReserialised = await post(reserialised, headers);

    assert.equal(asSent.statusCode, 200);
    assert.equal(asReserialised.statusCode, 401);
    assert.equal(asReserialised.json().message, 'INVALID_SIGNATURE');
    const job = await producer.webhookQueue.getJob('ev-evt_raw');
    assert.equal(decodeWebhookRawBody(job!.data).toString('utf8'), body);
  });

  test('application/json with a charset and +json media types are accepted', async (t) => {
    const { post } = await startTestReceiver(t);
    for (const contentType of [
      'application/json; charset=utf-8',
      'application/vnd.h2h+json',
      'application/merge-patch+json; charset=utf-8',
      'Application/Vnd.H2H+JSON;charset="UTF-8"',
    ]) {
      const body = webhookBody();
      const res = await post(body, { ...deliveryHeaders(body), 'content-type': contentType });
      assert.equal(res.statusCode, 200, contentType);
    }
  });

  test('a timestamp inside the tolerance either way is accepted', async (t) => {
    const { post } = await startTestReceiver(t);
    for (const offset of [-290, 290]) {
      const body = webhookBody();
      const res = await post(body, deliveryHeaders(body, { timestampS: nowS() + offset }));
      assert.equal(res.statusCode, 200, `offset ${offset} s`);
    }
  });

  test('an authentic body that is not JSON is acknowledged and queued as received', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    const body = '{"event":"order.updated", this is not json';

    const res = await post(body, deliveryHeaders(body, { eventId: 'evt_broken' }));

    assert.equal(res.statusCode, 200);
    const job = await producer.webhookQueue.getJob(webhookIdentity(Buffer.from(body)).jobId);
    assert.equal(decodeWebhookRawBody(job!.data).toString('utf8'), body);
    assert.equal(job!.name, 'unparsed');
    assert.equal(job!.data.headerEventId, 'evt_broken');
  });

  test('an authentic JSON body without a recognisable order, and an empty body, are queued', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    for (const [eventId, body] of [
      ['evt_no_order', '{"hello":"world"}'],
      ['evt_empty', ''],
    ] as const) {
      const res = await post(body, deliveryHeaders(body, { eventId }));
      assert.equal(res.statusCode, 200, eventId);
      assert.ok(await producer.webhookQueue.getJob(webhookIdentity(Buffer.from(body)).jobId), eventId);
    }
  });

  test('an authentic body that is not UTF-8 is queued base64 and decodes to the same bytes', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    const body = Buffer.from([0x7b, 0xff, 0xfe, 0x00, 0x7d]);

    const res = await post(body, deliveryHeaders(body, { eventId: 'evt_bytes' }));

    assert.equal(res.statusCode, 200);
    const job = await producer.webhookQueue.getJob(webhookIdentity(body).jobId);
    assert.equal(job!.data.rawBodyEncoding, 'base64');
    assert.deepEqual(decodeWebhookRawBody(job!.data), body);
  });
});

describe('POST /webhooks/h2h: duplicates', () => {
  test('a redelivery of the same event is answered 200 duplicate and adds no second job', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    const body = webhookBody('dup-order', 'evt_dup');

    const first = await post(body, deliveryHeaders(body, { timestampS: nowS() - 5 }));
    const again = await post(body, deliveryHeaders(body));

    assert.deepEqual(first.json(), { received: true, duplicate: false });
    assert.equal(again.statusCode, 200);
    assert.deepEqual(again.json(), { received: true, duplicate: true });
    assert.equal((await producer.webhookQueue.getJobCounts('waiting')).waiting, 1);
  });

  test('a captured delivery replayed under fresh X-Event-Id headers is one job; the mismatch is logged and counted', async (t) => {
    const { logger, lines } = capturedLogger({ name: 'receiver', level: 'info' });
    const { post, producer, metricsText } = await startTestReceiver(t, { logger });
    const body = webhookBody('replayed-order', 'evt_signed');
    const captured = deliveryHeaders(body);

    const answers = [await post(body, captured)];
    for (let i = 0; i < 5; i++) {
      answers.push(await post(body, { ...captured, 'x-event-id': `evt_forged_${i}` }));
    }

    assert.deepEqual(
      answers.map((a) => [a.statusCode, a.json().duplicate]),
      [[200, false], ...Array.from({ length: 5 }, () => [200, true])],
    );
    assert.equal(await producer.webhookQueue.count(), 1, 'one job for one signed event');
    assert.equal((await producer.webhookQueue.getJob('ev-evt_signed'))?.data.eventId, 'evt_signed');
    const warnings = lines
      .map((l) => JSON.parse(l))
      .filter((l) => l.headerEventId?.startsWith('evt_forged_'));
    assert.equal(warnings.length, 5);
    assert.equal(warnings[0].eventId, 'evt_signed');
    assert.match(await metricsText(), /^h2h_webhook_event_id_mismatch_total 5$/m);
  });

  test('without an event_id in the body the SHA-256 of the raw body dedupes, whatever the header says', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    const body = webhookBody('hashed-order', null);
    const other = webhookBody('hashed-order-2', null);

    const first = await post(body, deliveryHeaders(body, { eventId: null, timestampS: nowS() - 5 }));
    const again = await post(body, deliveryHeaders(body, { eventId: 'evt_fresh_header' }));
    const different = await post(other, deliveryHeaders(other, { eventId: null }));

    assert.deepEqual(
      [first.json().duplicate, again.json().duplicate, different.json().duplicate],
      [false, true, false],
    );
    const { jobId } = webhookIdentity(Buffer.from(body));
    const job = await producer.webhookQueue.getJob(jobId);
    assert.equal(job!.data.eventId, null);
    assert.match(job!.data.dedupeKey, /^body-sha256:[0-9a-f]{64}$/);
    assert.equal((await producer.webhookQueue.getJobCounts('waiting')).waiting, 2);
  });

  test('concurrent deliveries of one event all get 200 and leave one job; exactly one is not a duplicate', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    const body = webhookBody('burst-order', 'evt_burst');
    const headers = deliveryHeaders(body);

    const answers = await Promise.all(Array.from({ length: 20 }, () => post(body, headers)));

    assert.deepEqual(new Set(answers.map((a) => a.statusCode)), new Set([200]));
    assert.equal(answers.filter((a) => a.json().duplicate === false).length, 1);
    assert.equal((await producer.webhookQueue.getJobCounts('waiting')).waiting, 1);
  });

  test('a burst of concurrent deliveries, with duplicates of each, leaves one job per event and every 2xx has its job', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    const events = Array.from({ length: 30 }, (_, i) => {
      // Every third event without an event_id: the body hash dedupes it.
      return { body: webhookBody(`burst-${i}`, i % 3 === 0 ? null : `evt_burst_${i}`) };
    });
    const deliveries = [...events, ...events, ...events.slice(0, 10)].map(({ body }) => ({
      body,
      headers: deliveryHeaders(body),
    }));

    const answers = await Promise.all(deliveries.map((d) => post(d.body, d.headers)));

    assert.deepEqual(new Set(answers.map((a) => a.statusCode)), new Set([200]));
    assert.equal(answers.filter((a) => a.json().duplicate === false).length, events.length);
    assert.equal(await producer.webhookQueue.count(), events.length, 'one job per event');
    for (const { body } of deliveries) {
      const { jobId } = webhookIdentity(Buffer.from(body));
      assert.ok(await producer.webhookQueue.getJob(jobId), `${jobId} is in Redis`);
    }
  });
});

describe('POST /webhooks/h2h: refusals', () => {
  test('a missing signature or timestamp header is 401 SIGNATURE_MISSING and queues nothing', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    const body = webhookBody();
    const full = deliveryHeaders(body);
    for (const drop of ['x-signature', 'x-timestamp']) {
      const headers = { ...full };
      delete headers[drop];
      const res = await post(body, headers);
      assert.equal(res.statusCode, 401, drop);
      assert.deepEqual(Object.keys(res.json()).sort(), ['error', 'message', 'statusCode']);
      assert.equal(res.json().statusCode, 401);
      assert.equal(res.json().message, 'SIGNATURE_MISSING');
      assert.match(res.json().error, /header/);
    }
    assert.equal((await producer.webhookQueue.getJobCounts('waiting')).waiting, 0);
  });

  test('a signature from an unknown secret, or malformed, is 401 INVALID_SIGNATURE and queues nothing', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    const body = webhookBody();
    const wrong = await post(body, deliveryHeaders(body, { secret: 'not-the-secret' }));
    const malformed = await post(body, { ...deliveryHeaders(body), 'x-signature': 'zz' });
    for (const res of [wrong, malformed]) {
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().message, 'INVALID_SIGNATURE');
      assert.match(res.json().error, /raw request body/);
    }
    assert.equal((await producer.webhookQueue.getJobCounts('waiting')).waiting, 0);
  });

  test('a stale but authentic webhook is 401 TIMESTAMP_OUT_OF_TOLERANCE and queues an early poll of its order', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    const body = webhookBody('stale-order');

    const res = await post(body, deliveryHeaders(body, { timestampS: nowS() - 600 }));

    assert.equal(res.statusCode, 401);
    assert.equal(res.json().message, 'TIMESTAMP_OUT_OF_TOLERANCE');
    assert.match(res.json().error, /clock/);
    assert.equal((await producer.webhookQueue.getJobCounts('waiting')).waiting, 0);
    const poll = await producer.pollQueue.getJob(
      pollRequestJobId({ partnerRef: 'stale-order', reason: 'stale_webhook' }),
    );
    assert.deepEqual(poll?.data, {
      partnerRef: 'stale-order',
      invoiceNumber: 'INV-stale-order',
      reason: 'stale_webhook',
    });
  });

  test('a stale webhook finds its order under data, under order or at the top level; one poll per order', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    const bodies = [
      JSON.stringify({ data: { partner_ref: 'in-data' } }),
      JSON.stringify({ order: { invoice_number: 'INV-in-order' } }),
      JSON.stringify({ partner_ref: 'top-level', status: 'SUCCESS' }),
      JSON.stringify({ data: { partner_ref: 'in-data' }, again: true }),
    ];
    for (const body of bodies) {
      const res = await post(body, deliveryHeaders(body, { timestampS: nowS() + 600 }));
      assert.equal(res.json().message, 'TIMESTAMP_OUT_OF_TOLERANCE');
    }
    const polls = await producer.pollQueue.getJobs(['waiting']);
    assert.deepEqual(polls.map((job) => job.id).sort(), [
      'poll-inv-INV-in-order',
      'poll-ref-in-data',
      'poll-ref-top-level',
    ]);
  });

  test('a stale webhook with a bad signature queues no poll', async (t) => {
    const { post, producer } = await startTestReceiver(t);
    const body = webhookBody('forged');
    const res = await post(body, deliveryHeaders(body, { secret: 'forger', timestampS: nowS() - 600 }));
    assert.equal(res.json().message, 'INVALID_SIGNATURE');
    assert.equal((await producer.pollQueue.getJobCounts('waiting')).waiting, 0);
  });

  test('the tolerance is a setting', async (t) => {
    const { post } = await startTestReceiver(t, { toleranceS: 10 });
    const body = webhookBody();
    const res = await post(body, deliveryHeaders(body, { timestampS: nowS() - 60 }));
    assert.equal(res.json().message, 'TIMESTAMP_OUT_OF_TOLERANCE');
  });

  test('a body over 256 KiB is 413 PAYLOAD_TOO_LARGE; the limit is a setting', async (t) => {
    const redis = await privateRedis(t);
    const byDefault = await startTestReceiver(t, { redis });
    const small = await startTestReceiver(t, { redis, bodyLimit: 1024 });
    const big = JSON.stringify({ data: { partner_ref: 'x' }, pad: 'a'.repeat(256 * 1024) });
    const medium = JSON.stringify({ data: { partner_ref: 'x' }, pad: 'a'.repeat(2048) });

    const overDefault = await byDefault.post(big, deliveryHeaders(big));
    const underDefault = await byDefault.post(medium, deliveryHeaders(medium));
    const overSmall = await small.post(medium, deliveryHeaders(medium));

    assert.equal(overDefault.statusCode, 413);
    assert.deepEqual(overDefault.json(), {
      statusCode: 413,
      message: 'PAYLOAD_TOO_LARGE',
      error: `the body is over the limit of ${256 * 1024} bytes`,
    });
    assert.equal(underDefault.statusCode, 200);
    assert.equal(overSmall.statusCode, 413);
  });

  test('a content type other than JSON, or none, is 415 UNSUPPORTED_MEDIA_TYPE', async (t) => {
    const { post, producer, app } = await startTestReceiver(t);
    const body = webhookBody();
    for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const res = await post(body, { ...deliveryHeaders(body), 'content-type': contentType });
      assert.equal(res.statusCode, 415, contentType);
      assert.equal(res.json().message, 'UNSUPPORTED_MEDIA_TYPE');
      assert.match(res.json().error, /application\/json/);
    }
    const { 'content-type': _, ...noType } = deliveryHeaders('');
    const untyped = await app.inject({ method: 'POST', url: '/webhooks/h2h', headers: noType });
    assert.equal(untyped.statusCode, 415);
    assert.equal(untyped.json().message, 'UNSUPPORTED_MEDIA_TYPE');
    assert.equal((await producer.webhookQueue.getJobCounts('waiting')).waiting, 0);
  });

  test('an unknown route, or GET on the webhook path, is 404 NOT_FOUND naming the webhook path', async (t) => {
    const { app } = await startTestReceiver(t);
    for (const [method, url] of [
      ['POST', '/webhooks'],
      ['GET', '/webhooks/h2h'],
    ] as const) {
      const res = await app.inject({ method, url });
      assert.equal(res.statusCode, 404);
      assert.equal(res.json().message, 'NOT_FOUND');
      assert.match(res.json().error, /POSTed to \/webhooks\/h2h/);
    }
  });
});

describe('secret rotation', () => {
  test('while two secrets are configured both verify; once the old one is removed it is refused', async (t) => {
    const redis = await privateRedis(t);
    const rotating = await startTestReceiver(t, { redis, secrets: ['new-secret', 'old-secret'] });
    const rotated = await startTestReceiver(t, { redis, secrets: ['new-secret'] });
    const send = (receiver: typeof rotating, secret: string) => {
      const body = webhookBody();
      return receiver.post(body, deliveryHeaders(body, { secret }));
    };

    assert.equal((await send(rotating, 'new-secret')).statusCode, 200);
    assert.equal((await send(rotating, 'old-secret')).statusCode, 200);
    assert.equal((await send(rotated, 'new-secret')).statusCode, 200);
    const refused = await send(rotated, 'old-secret');
    assert.equal(refused.statusCode, 401);
    assert.equal(refused.json().message, 'INVALID_SIGNATURE');
  });
});

describe('header names and path are settings', () => {
  test('a receiver configured with other header names and path reads those', async (t) => {
    const { post, producer } = await startTestReceiver(t, {
      path: '/hooks/upstream',
      headers: {
        timestamp: 'X-H2H-Time',
        signature: 'x-h2h-sig',
        eventId: 'x-h2h-id',
        eventType: 'x-h2h-kind',
      },
    });
    const body = webhookBody('custom-order', 'evt_in_body');
    const { 'x-timestamp': ts, 'x-signature': sig } = signedWebhookHeaders(SECRET, body);
    const headers = {
      'content-type': 'application/json',
      'x-h2h-time': ts,
      'x-h2h-sig': sig,
      'x-h2h-id': 'evt_custom',
      'x-h2h-kind': 'order.updated',
    };

    const res = await post(body, headers, '/hooks/upstream');
    const defaultNames = await post(body, deliveryHeaders(body), '/hooks/upstream');

    assert.equal(res.statusCode, 200);
    const job = await producer.webhookQueue.getJob('ev-evt_in_body');
    assert.equal(job?.data.headers.eventType, 'order.updated');
    assert.equal(job?.data.headerEventId, 'evt_custom', 'the renamed event id header is read');
    assert.equal(defaultNames.json().message, 'SIGNATURE_MISSING');
  });
});

describe('Redis outages', () => {
  test('with Redis stopped a valid webhook is 503 QUEUE_UNAVAILABLE and readyz 503; once back, 200 again', async (t) => {
    const { post, app, redis, producer } = await startTestReceiver(t);
    const body = webhookBody('outage-order', 'evt_outage');
    const headers = deliveryHeaders(body);
    assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);

    await redis.pause();
    const during = await post(body, headers);
    const readyDuring = await app.inject({ method: 'GET', url: '/readyz' });
    const aliveDuring = await app.inject({ method: 'GET', url: '/healthz' });

    assert.equal(during.statusCode, 503);
    assert.deepEqual(Object.keys(during.json()).sort(), ['error', 'message', 'statusCode']);
    assert.equal(during.json().message, 'QUEUE_UNAVAILABLE');
    assert.match(during.json().error, /retry later/);
    assert.equal(readyDuring.statusCode, 503);
    assert.equal(readyDuring.json().message, 'QUEUE_UNAVAILABLE');
    assert.equal(aliveDuring.statusCode, 200);

    await redis.resume();
    const after = await waitFor(
      async () => {
        const res = await post(body, deliveryHeaders(body));
        return res.statusCode === 200 ? res : undefined;
      },
      { timeoutMs: 15_000, message: 'a 200 after Redis came back' },
    );
    assert.equal(after.json().received, true);
    assert.ok(await producer.webhookQueue.getJob('ev-evt_outage'));
    assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
  });

  test('when Redis refuses the adds of a burst, every webhook of it is answered 503 and none is queued', async (t) => {
    const { post, producer, redis } = await startTestReceiver(t);
    const admin = new Redis(redis.url);
    admin.on('error', () => {});
    t.after(() => admin.disconnect());
    const bodies = Array.from({ length: 12 }, (_, i) => webhookBody(`refused-${i}`));
    // Over its memory limit (noeviction), Redis refuses every command that may write.
    await admin.config('SET', 'maxmemory', '1');

    const answers = await Promise.all(bodies.map((body) => post(body, deliveryHeaders(body))));
    await admin.config('SET', 'maxmemory', '0');

    for (const answer of answers) {
      assert.equal(answer.statusCode, 503);
      assert.equal(answer.json().message, 'QUEUE_UNAVAILABLE');
    }
    assert.equal(await producer.webhookQueue.count(), 0);
  });

  test('a frozen Redis (connected, never answering) gives 503 QUEUE_UNAVAILABLE, not a hang', async (t) => {
    const redis = await privateRedis(t);
    const proxy = await freezableProxy(t, redis);
    const { post } = await startTestReceiver(t, { redis, producer: { enqueueTimeoutMs: 300 } });
    // The test's producer talks to Redis directly; this receiver goes through the proxy.
    const frozen = await startTestReceiver(t, {
      redis: { ...redis, url: proxy.url },
      producer: { enqueueTimeoutMs: 300 },
    });
    const warmup = webhookBody();
    assert.equal((await frozen.post(warmup, deliveryHeaders(warmup))).statusCode, 200);

    proxy.freeze();
    const body = webhookBody();
    const res = await frozen.post(body, deliveryHeaders(body));
    const ready = await frozen.app.inject({ method: 'GET', url: '/readyz' });

    assert.equal(res.statusCode, 503);
    assert.equal(res.json().message, 'QUEUE_UNAVAILABLE');
    assert.equal(ready.statusCode, 503);
    const direct = webhookBody();
    assert.equal((await post(direct, deliveryHeaders(direct))).statusCode, 200, 'Redis itself is fine');
  });
});

describe('health, readiness and metrics', () => {
  test('healthz and readyz answer 200 while Redis is up', async (t) => {
    const { app } = await startTestReceiver(t);
    const health = await app.inject({ method: 'GET', url: '/healthz' });
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    assert.deepEqual([health.statusCode, health.json()], [200, { status: 'ok' }]);
    assert.deepEqual([ready.statusCode, ready.json()], [200, { status: 'ready' }]);
  });

  test('metrics count requests by outcome, time verify-and-enqueue, and show queue depth', async (t) => {
    const { metricsText, post } = await startTestReceiver(t);
    const body = webhookBody('metrics-order', 'evt_m');
    await post(body, deliveryHeaders(body));
    await post(body, deliveryHeaders(body));
    await post(body, deliveryHeaders(body, { secret: 'wrong' }));
    await post(body, { ...deliveryHeaders(body), 'content-type': 'text/plain' });

    const text = await metricsText();

    assert.match(text, /^h2h_webhook_requests_total\{outcome="accepted"\} 1$/m);
    assert.match(text, /^h2h_webhook_requests_total\{outcome="duplicate"\} 1$/m);
    assert.match(text, /^h2h_webhook_requests_total\{outcome="invalid_signature"\} 1$/m);
    assert.match(text, /^h2h_webhook_requests_total\{outcome="unsupported_media_type"\} 1$/m);
    assert.match(text, /^h2h_webhook_enqueue_seconds_count 2$/m);
    assert.match(text, /^h2h_webhook_event_id_mismatch_total 0$/m);
    assert.match(text, /^h2h_queue_jobs\{queue="h2h-webhooks",state="waiting"\} 1$/m);
    assert.match(text, /^h2h_queue_jobs\{queue="h2h-poll-requests",state="waiting"\} 0$/m);
    assert.match(text, /^process_cpu_user_seconds_total /m);
  });
});

describe('logging', () => {
  test('a signature header renamed by a setting is redacted too', () => {
    const { logger, lines } = capturedLogger({
      name: 'receiver',
      level: 'trace',
      redactHeaders: ['X-H2H-Sig'],
    });
    logger.info({ req: { headers: { 'x-h2h-sig': 'deadbeef', host: 'h' } } }, 'request');
    assert.equal(lines.join('').includes('deadbeef'), false);
    assert.equal(JSON.parse(lines[0]!).req.headers.host, 'h');
  });

  test('log lines name events and refusals but never carry a secret or a signature', async (t) => {
    const { logger, lines } = capturedLogger({ name: 'receiver', level: 'trace' });
    const { post, redis } = await startTestReceiver(t, { logger, secrets: [SECRET, 'older-secret'] });
    const body = webhookBody('logged-order', 'evt_log');
    const signatures: string[] = [];
    const send = async (headers: Record<string, string>) => {
      signatures.push(headers['x-signature'] ?? '');
      return post(body, headers);
    };
    await send(deliveryHeaders(body));
    await send(deliveryHeaders(body, { secret: 'wrong' }));
    await send(deliveryHeaders(body, { timestampS: nowS() - 600 }));
    await redis.pause();
    await send(deliveryHeaders(body));

    const all = lines.join('');
    assert.match(all, /webhook queued/);
    assert.match(all, /webhook refused/);
    assert.match(all, /evt_log/);
    for (const secret of [SECRET, 'older-secret', ...signatures]) {
      assert.equal(all.includes(secret), false, `${secret.slice(0, 12)}… leaked into the logs`);
    }
  });
});

test('a 200 answer is JSON with exactly received and duplicate', async (t) => {
  const { post } = await startTestReceiver(t);
  const body = webhookBody();
  const ok = await post(body, deliveryHeaders(body, { eventId: `evt_${randomUUID()}` }));
  assert.match(ok.headers['content-type'] as string, /^application\/json/);
  assert.deepEqual(Object.keys(ok.json()).sort(), ['duplicate', 'received']);
});
