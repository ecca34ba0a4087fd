import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { freePort } from '../../src/dev/redis-server.js';
import { POLL_REQUEST_QUEUE, pollRequestJobId } from '../../src/queue/poll-request-queue.js';
import { findOrderInWebhook, parseWebhookBody } from '../../src/queue/webhook-order.js';
import { createWebhookProducer, QueueUnavailableError } from '../../src/queue/webhook-producer.js';
import {
  decodeWebhookRawBody,
  encodeWebhookRawBody,
  WEBHOOK_COMPLETED_RETENTION_COUNT,
  WEBHOOK_COMPLETED_RETENTION_S,
  WEBHOOK_QUEUE,
  webhookIdentity,
} from '../../src/queue/webhook-queue.js';
import { privateRedis } from '../helpers/redis.js';

/** A body whose signed `event_id` is `eventId`, naming order `ref` in `status`. */
const bodyWithId = (eventId: unknown, ref = 'r-1', status = 'SUCCESS') =>
  Buffer.from(
    JSON.stringify({ event_id: eventId, event: 'order.updated', data: { partner_ref: ref, status } }),
  );

describe('job ids', () => {
  test('the event_id of the body is the key: an id-safe one becomes ev-<id>, even when it is all digits', () => {
    assert.equal(webhookIdentity(bodyWithId('evt_123')).jobId, 'ev-evt_123');
    assert.equal(webhookIdentity(bodyWithId('12345')).jobId, 'ev-12345');
    assert.equal(webhookIdentity(bodyWithId(12345)).jobId, 'ev-12345');
    assert.equal(webhookIdentity(bodyWithId('evt_123')).dedupeKey, 'event-id:evt_123');
    assert.equal(webhookIdentity(bodyWithId('evt_123')).eventId, 'evt_123');
  });

  test('an event id with a colon, a space or over 128 characters is hashed', () => {
    for (const eventId of ['evt:1', 'evt 1', 'x'.repeat(129), 'é']) {
      assert.match(webhookIdentity(bodyWithId(eventId)).jobId, /^evh-[0-9a-f]{64}$/, eventId);
    }
  });

  test('a body without a usable event_id, or that is not JSON, is keyed on the SHA-256 of its raw bytes', () => {
    const identity = webhookIdentity(Buffer.from('{"a":1}'));
    const hex = '015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862';
    assert.deepEqual(identity, {
      dedupeKey: `body-sha256:${hex}`,
      jobId: `body-${hex}`,
      eventId: null,
      jobName: 'unparsed',
    });
    for (const body of [
      '{"event_id":""}',
      '{"event_id":null}',
      '{"event_id":{}}',
      '[1]',
      '{"event_id":',
      '',
    ]) {
      assert.match(webhookIdentity(Buffer.from(body)).jobId, /^body-[0-9a-f]{64}$/, body);
    }
  });

  test('a job is named by its order reference and status, so Bull Board finds an order by name', () => {
    assert.equal(webhookIdentity(bodyWithId('e1', 'shop-42', 'PROCESSING')).jobName, 'shop-42 PROCESSING');
    const byInvoice = Buffer.from('{"event_id":"e2","order":{"invoice_number":"INV-9","status":"FAILED"}}');
    assert.equal(webhookIdentity(byInvoice).jobName, 'INV-9 FAILED');
    assert.equal(webhookIdentity(Buffer.from('{"event_id":"e3","data":{}}')).jobName, 'unparsed');
    assert.equal(webhookIdentity(Buffer.from('not json')).jobName, 'unparsed');
  });

  test('a poll request is one job per order: by partner_ref, else by invoice number', () => {
    assert.equal(
      pollRequestJobId({ partnerRef: 'r-1', invoiceNumber: 'INV-1', reason: 'stale_webhook' }),
      'poll-ref-r-1',
    );
    assert.equal(pollRequestJobId({ invoiceNumber: 'INV-1', reason: 'stale_webhook' }), 'poll-inv-INV-1');
    assert.match(
      pollRequestJobId({ partnerRef: 'a/b c', reason: 'stale_webhook' }),
      /^poll-refh-[0-9a-f]{64}$/,
    );
    assert.throws(() => pollRequestJobId({ reason: 'stale_webhook' }), /partnerRef or an invoiceNumber/);
  });

  test('BullMQ accepts every form of id, and the job carries the documented options', async (t) => {
    const redis = await privateRedis(t);
    const producer = createWebhookProducer({ redisUrl: redis.url, prefix: 'contract' });
    t.after(() => producer.close());
    await producer.ping();
    for (const eventId of ['12345', 'evt:1:2', 'evt_ok', null]) {
      const result = await producer.enqueueWebhook({
        rawBody: eventId === null ? Buffer.from('{"n":null}') : bodyWithId(eventId),
        headerEventId: eventId,
        timestamp: 1,
      });
      assert.equal(result.duplicate, false);
      assert.ok(await producer.webhookQueue.getJob(result.jobId), String(eventId));
    }
    const poll = await producer.requestPoll({ partnerRef: '42', reason: 'stale_webhook' });
    assert.equal(poll.jobId, 'poll-ref-42');

    const job = await producer.webhookQueue.getJob('ev-evt_ok');
    assert.equal(producer.webhookQueue.name, WEBHOOK_QUEUE);
    assert.equal(producer.pollQueue.name, POLL_REQUEST_QUEUE);
    assert.equal(job!.name, 'r-1 SUCCESS');
    assert.equal(job!.opts.attempts, 10);
    assert.deepEqual(job!.opts.backoff, { type: 'exponential', delay: 1000 });
    assert.deepEqual(job!.opts.removeOnComplete, {
      age: WEBHOOK_COMPLETED_RETENTION_S,
      count: WEBHOOK_COMPLETED_RETENTION_COUNT,
    });
    assert.equal(job!.opts.removeOnFail, false);
    assert.equal(await producer.redis.exists('contract:h2h-webhooks:ev-evt_ok'), 1, 'the prefix is used');
  });
});

describe('raw body encoding', () => {
  test('UTF-8 bytes travel as text, other bytes as base64, and both decode to the same bytes', () => {
    const text = Buffer.from('{"name":"café ☕"}');
    const binary = Buffer.from([0xc3, 0x28, 0xff]);
    assert.deepEqual(encodeWebhookRawBody(text), { rawBody: '{"name":"café ☕"}', rawBodyEncoding: 'utf8' });
    assert.equal(encodeWebhookRawBody(binary).rawBodyEncoding, 'base64');
    assert.deepEqual(decodeWebhookRawBody(encodeWebhookRawBody(text)), text);
    assert.deepEqual(decodeWebhookRawBody(encodeWebhookRawBody(binary)), binary);
  });
});

describe('findOrderInWebhook', () => {
  test('finds the order under data, else under order, else at the top level', () => {
    assert.equal(
      findOrderInWebhook({ data: { partner_ref: 'a' }, order: { partner_ref: 'b' } })?.partnerRef,
      'a',
    );
    assert.deepEqual(findOrderInWebhook({ order: { invoice_number: 'INV-1', status: 'SUCCESS' } }), {
      location: 'order',
      order: { invoice_number: 'INV-1', status: 'SUCCESS' },
      partnerRef: null,
      invoiceNumber: 'INV-1',
    });
    assert.equal(findOrderInWebhook({ partner_ref: 'top', status: 'PENDING' })?.location, 'top-level');
  });

  test('a data field without a reference is skipped for the next place', () => {
    assert.equal(
      findOrderInWebhook({ data: { status: 'SUCCESS' }, order: { partner_ref: 'b' } })?.location,
      'order',
    );
  });

  test('no recognisable order gives null', () => {
    for (const body of [
      null,
      'text',
      42,
      [],
      {},
      { data: [] },
      { data: { partner_ref: '' } },
      { partner_ref: 7 },
    ]) {
      assert.equal(findOrderInWebhook(body), null, JSON.stringify(body));
    }
  });

  test('parseWebhookBody never throws', () => {
    assert.deepEqual(parseWebhookBody('{"a":1}'), { ok: true, body: { a: 1 } });
    const broken = parseWebhookBody(Buffer.from('{"a":'));
    assert.equal(broken.ok, false);
  });
});

describe('producer without Redis', () => {
  test('an unreachable Redis fails every operation with QueueUnavailableError within the timeout', async (t) => {
    const port = await freePort();
    const producer = createWebhookProducer({ redisUrl: `redis://127.0.0.1:${port}`, enqueueTimeoutMs: 300 });
    t.after(() => producer.close());

    await assert.rejects(producer.ping(), QueueUnavailableError);
    await assert.rejects(
      producer.enqueueWebhook({ rawBody: Buffer.from('{}'), headerEventId: 'evt_x', timestamp: 1 }),
      (error: unknown) => error instanceof QueueUnavailableError && error.code === 'QUEUE_UNAVAILABLE',
    );
    await assert.rejects(
      producer.requestPoll({ partnerRef: 'r', reason: 'stale_webhook' }),
      QueueUnavailableError,
    );
    await assert.rejects(producer.jobCounts(), QueueUnavailableError);
  });
});
