import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { TestContext } from 'node:test';
import { waitFor } from './wait.js';

/**
 * A webhook receiver for tests: a real HTTP server on 127.0.0.1 that records every delivery
 * (raw body bytes, headers, arrival time) and checks its signature with `node:crypto` directly.
 *
 * It deliberately does not import `src/upstream/signature.ts`: it is the independent verifier
 * that the module under test (and everything that signs with it) is checked against. The rule
 * it implements is decisions.md's: lowercase hex HMAC-SHA256, keyed with the member's API
 * secret, over `X-Timestamp + "." + raw body`.
 */

/** What the sink answers to one delivery: an HTTP status, or `'hang'` to never answer. */
export type SinkAnswer = number | 'hang';

/** One request the sink received. */
export interface WebhookDelivery {
  /** 0-based arrival order over the whole sink. */
  index: number;
  /** `Date.now()` when the whole body had arrived. */
  receivedAt: number;
  method: string;
  /** Request path (with query string) as sent. */
  path: string;
  headers: IncomingHttpHeaders;
  /** The body bytes exactly as received. */
  rawBody: Buffer;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  body: WebhookBody | undefined;
  timestamp: string | undefined;
  signature: string | undefined;
  eventId: string | undefined;
  eventType: string | undefined;
  /** True when `signature` is the HMAC of `timestamp.rawBody` under one of the sink's secrets. */
  signatureValid: boolean;
  /** What the sink answered. */
  answer: SinkAnswer;
}

/** The webhook body of decisions.md, loosely typed: the tests assert its shape. */
export interface WebhookBody {
  event_id?: unknown;
  event?: unknown;
  created_at?: unknown;
  data?: Record<string, unknown> & { partner_ref?: string; status?: string; serial_number?: string | null };
  [key: string]: unknown;
}

export interface WebhookSinkOptions {
  /** Secrets the signature is checked against (the member's API secret). */
  secrets: readonly string[];
  /**
   * Decides the answer to each delivery. Default: 200 to everything.
   * See {@link failFirst} and {@link hangFirst} for the common cases.
   */
  answer?: (delivery: Omit<WebhookDelivery, 'answer'>) => SinkAnswer;
  /**
   * Holds the answer to a delivery until the returned promise settles (the delivery is counted
   * at once): a shop that is still answering. Default: answers at once.
   */
  hold?: (delivery: Omit<WebhookDelivery, 'answer'>) => Promise<unknown> | undefined;
  /** Port to listen on. Default: a free one (a test reopens a closed sink's port to bring it back). */
  port?: number;
}

export interface WebhookSink {
  /** `http://127.0.0.1:<port>/webhooks/h2h`: give it to a member or as `callback_url`. */
  readonly url: string;
  /** Every delivery so far, in arrival order. */
  readonly deliveries: readonly WebhookDelivery[];
  /** Deliveries whose body's `data.partner_ref` is `partnerRef`, in arrival order. */
  forRef(partnerRef: string): WebhookDelivery[];
  /**
   * Waits until at least `count` deliveries satisfy `match` and returns them (in arrival order).
   * Fails after `timeoutMs` (default 10 s) with the deliveries seen so far in the message.
   */
  waitForDeliveries(
    match: (delivery: WebhookDelivery) => boolean,
    count?: number,
    options?: { timeoutMs?: number; message?: string },
  ): Promise<WebhookDelivery[]>;
  /** Connections open now (a delivery the sink does not answer keeps its connection open). */
  readonly openConnections: number;
  /** Stops the server and drops open connections (including hung ones). */
  close(): Promise<void>;
}

const HEX_SHA256 = /^[0-9a-f]{64}$/;

/**
 * The independent signature check: `createHmac` over `timestamp + "."` then the raw bytes,
 * compared in constant time. A missing header, non-hex or wrong length is simply invalid.
 */
export function isValidSignature(
  secret: string,
  timestamp: string | undefined,
  signature: string | undefined,
  rawBody: Buffer,
): boolean {
  if (timestamp === undefined || signature === undefined || !HEX_SHA256.test(signature)) return false;
  const expected = createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest();
  return timingSafeEqual(expected, Buffer.from(signature, 'hex'));
}

/** An answer policy: `status` (default 500) for the first `n` deliveries, then 200. */
export function failFirst(n: number, status = 500): WebhookSinkOptions['answer'] {
  return (delivery) => (delivery.index < n ? status : 200);
}

/** An answer policy: never answer the first `n` deliveries (the sender must time out), then 200. */
export function hangFirst(n: number): WebhookSinkOptions['answer'] {
  return (delivery) => (delivery.index < n ? 'hang' : 200);
}

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Starts a sink on 127.0.0.1 (random port) and closes it when the test ends. */
export async function startWebhookSink(
  t: Pick<TestContext, 'after'>,
  options: WebhookSinkOptions,
): Promise<WebhookSink> {
  const deliveries: WebhookDelivery[] = [];
  const answer = options.answer ?? (() => 200);

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks);
      let body: WebhookBody | undefined;
      try {
        body = JSON.parse(rawBody.toString('utf8')) as WebhookBody;
      } catch {
        body = undefined;
      }
      const timestamp = headerValue(req.headers, 'x-timestamp');
      const signature = headerValue(req.headers, 'x-signature');
      const received: Omit<WebhookDelivery, 'answer'> = {
        index: deliveries.length,
        receivedAt: Date.now(),
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        rawBody,
        body,
        timestamp,
        signature,
        eventId: headerValue(req.headers, 'x-event-id'),
        eventType: headerValue(req.headers, 'x-event-type'),
        signatureValid: options.secrets.some((secret) =>
          isValidSignature(secret, timestamp, signature, rawBody),
        ),
      };
      const decided = answer(received);
      deliveries.push({ ...received, answer: decided });
      if (decided === 'hang') return;
      const reply = () => {
        res.writeHead(decided, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ received: true }));
      };
      const held = options.hold?.(received);
      if (held) void held.then(reply, reply);
      else reply();
    });
  });

  const connections = new Set<Socket>();
  server.on('connection', (socket) => {
    connections.add(socket);
    socket.on('close', () => connections.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  t.after(close);

  return {
    url: `http://127.0.0.1:${port}/webhooks/h2h`,
    deliveries,
    get openConnections() {
      return connections.size;
    },
    forRef: (partnerRef) => deliveries.filter((d) => d.body?.data?.partner_ref === partnerRef),
    async waitForDeliveries(match, count = 1, { timeoutMs = 10_000, message } = {}) {
      return waitFor(
        () => {
          const found = deliveries.filter(match);
          return found.length >= count ? found : undefined;
        },
        {
          timeoutMs,
          message:
            message ??
            `${count} matching webhook deliveries (seen: ${JSON.stringify(
              deliveries.map((d) => ({ ref: d.body?.data?.partner_ref, status: d.body?.data?.status })),
            )})`,
        },
      );
    },
    close,
  };
}
