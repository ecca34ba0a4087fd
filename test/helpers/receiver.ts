import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { connect, createServer, type Socket } from 'node:net';
import type { TestContext } from 'node:test';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { RedisServer } from '../../src/dev/redis-server.js';
import {
  createWebhookProducer,
  type WebhookProducer,
  type WebhookProducerOptions,
} from '../../src/queue/webhook-producer.js';
import { buildReceiverApp, type ReceiverAppOptions } from '../../src/receiver/app.js';
import { createReceiverMetrics } from '../../src/receiver/metrics.js';
import { signedWebhookHeaders } from '../../src/upstream/signature.js';
import { privateRedis } from './redis.js';

/** The demo member's webhook secret (fixtures/demo.json). */
export const SECRET = 'sim_secret_demo_M0001';

/** A webhook body as the simulator sends it, for an order with `partnerRef` (null `eventId`: no `event_id`). */
export function webhookBody(
  partnerRef = `ref-${randomUUID().slice(0, 8)}`,
  eventId: string | null = `evt_${randomUUID()}`,
) {
  return JSON.stringify({
    ...(eventId === null ? {} : { event_id: eventId }),
    event: 'order.updated',
    created_at: new Date().toISOString(),
    data: { invoice_number: `INV-${partnerRef}`, partner_ref: partnerRef, status: 'SUCCESS' },
  });
}

/** The `event_id` of a JSON body, if it has a string one. */
function bodyEventId(rawBody: string | Buffer): string | undefined {
  try {
    const id = JSON.parse(rawBody.toString()).event_id;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Headers of a delivery of `rawBody` signed with `secret` at `timestampS` (default now). The
 * `X-Event-Id` header is the body's `event_id` as the upstream sends it, unless `eventId` says
 * otherwise (null: no header).
 */
export function deliveryHeaders(
  rawBody: string | Buffer,
  options: { secret?: string; timestampS?: number; eventId?: string | null } = {},
): Record<string, string> {
  const { secret = SECRET, timestampS, eventId = bodyEventId(rawBody) ?? `evt_${randomUUID()}` } = options;
  return {
    'content-type': 'application/json',
    ...signedWebhookHeaders(secret, rawBody, timestampS),
    ...(eventId === null ? {} : { 'x-event-id': eventId, 'x-event-type': 'order.updated' }),
  };
}

export interface TestReceiver {
  app: FastifyInstance;
  producer: WebhookProducer;
  redis: RedisServer;
  /** The receiver's metrics as a scrape would read them (they are served on a port of their own). */
  metricsText(): Promise<string>;
  /** POSTs `rawBody` with `headers` to the webhook path through `inject`. */
  post(
    rawBody: string | Buffer,
    headers: Record<string, string>,
    path?: string,
  ): Promise<LightMyRequestResponse>;
}

export interface TestReceiverOptions extends Partial<Omit<ReceiverAppOptions, 'producer'>> {
  /** The default upstream's secrets, when `upstreams` is not given. Default: [SECRET]. */
  secrets?: readonly string[];
  /** Default: a new private redis-server for this test. */
  redis?: RedisServer;
  producer?: Omit<WebhookProducerOptions, 'redisUrl'>;
}

/** A receiver app (not listening) on a private Redis, closed when the test ends. */
export async function startTestReceiver(
  t: Pick<TestContext, 'after'>,
  options: TestReceiverOptions = {},
): Promise<TestReceiver> {
  const { redis: givenRedis, producer: producerOptions, secrets = [SECRET], ...appOptions } = options;
  const redis = givenRedis ?? (await privateRedis(t));
  const producer = createWebhookProducer({ redisUrl: redis.url, ...producerOptions });
  t.after(() => producer.close());
  await producer.ping();
  const metrics = createReceiverMetrics(producer);
  const app = await buildReceiverApp({
    upstreams: [{ name: 'default', secrets }],
    metrics,
    ...appOptions,
    producer,
  });
  t.after(() => app.close());
  const webhookPath = appOptions.path ?? '/webhooks/h2h';
  return {
    app,
    producer,
    redis,
    metricsText: () => metrics.registry.metrics(),
    post: (rawBody, headers, path = webhookPath) =>
      app.inject({ method: 'POST', url: path, payload: rawBody, headers }),
  };
}

/**
 * A TCP proxy in front of Redis that can freeze: once frozen it keeps every connection open and
 * forwards nothing, like a Redis process that was stopped with SIGSTOP.
 */
export async function freezableProxy(
  t: Pick<TestContext, 'after'>,
  target: { port: number },
): Promise<{ url: string; freeze(): void }> {
  let frozen = false;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(target.port, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.on('data', (chunk) => {
      if (!frozen) upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!frozen) client.write(chunk);
    });
    for (const socket of [client, upstream]) {
      socket.on('error', () => {});
      socket.on('close', () => {
        client.destroy();
        upstream.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return {
    url: `redis://127.0.0.1:${(server.address() as AddressInfo).port}`,
    freeze: () => {
      frozen = true;
    },
  };
}
