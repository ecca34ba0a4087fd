import assert from 'node:assert/strict';
import { connect, createServer, type Socket } from 'node:net';
import { describe, type TestContext, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { loadConfig, receiverSettings } from '../../src/config/config.js';
import { freePort } from '../../src/dev/redis-server.js';
import { type RunningReceiver, startReceiver } from '../../src/receiver/server.js';
import { capturedLogger } from '../helpers/logs.js';
import { deliveryHeaders, SECRET, webhookBody } from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { httpRequest } from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';

/** A receiver on a private Redis with `env` settings on top of the test defaults. */
async function receiverWith(
  t: TestContext,
  env: Record<string, string> = {},
  processEnv: NodeJS.ProcessEnv = {},
): Promise<RunningReceiver> {
  const redis = await privateRedis(t);
  const config = loadConfig({
    REDIS_URL: redis.url,
    H2H_API_SECRET: SECRET,
    PORT: '0',
    H2H_RECEIVER_METRICS_PORT: '0',
    ...env,
  });
  const receiver = await startReceiver(receiverSettings(config), { env: processEnv });
  t.after(() => receiver.close());
  return receiver;
}

const portOf = (receiver: RunningReceiver) => Number(new URL(receiver.origin).port);

/** What a raw connection received before the server closed it. */
interface RawOutcome {
  status: number | null;
  headers: string;
  body: string;
}

/**
 * Opens a raw TCP connection, writes `data` (and then whatever `keepWriting` writes), and
 * resolves with what came back once the server closed the connection.
 */
function rawExchange(
  port: number,
  data: string | Buffer,
  keepWriting?: (socket: Socket) => void,
): Promise<RawOutcome> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'ECONNRESET' && error.code !== 'EPIPE') reject(error);
    });
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', body = ''] = text.split('\r\n\r\n');
      const status = /^HTTP\/1\.1 (\d{3})/.exec(head);
      resolve({ status: status ? Number(status[1]) : null, headers: head, body });
    });
    socket.on('connect', () => {
      socket.write(data);
      keepWriting?.(socket);
    });
  });
}

function assertDocumentedError(outcome: RawOutcome, status: number, code: string) {
  assert.equal(outcome.status, status, outcome.headers);
  assert.match(outcome.headers, /content-type: application\/json/i);
  const body = JSON.parse(outcome.body) as Record<string, unknown>;
  assert.deepEqual(Object.keys(body).sort(), ['error', 'message', 'statusCode']);
  assert.equal(body.statusCode, status);
  assert.equal(body.message, code);
}

/** `gc()` of this process, made available without a command-line flag. */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

describe('requests Node or Fastify refuse before the route get the documented answer', () => {
  test('no Host header, unparseable framing, oversized headers and a malformed URL', async (t) => {
    const receiver = await receiverWith(t);
    const port = portOf(receiver);

    const noHost = await rawExchange(
      port,
      'POST /webhooks/h2h HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
    );
    assertDocumentedError(noHost, 400, 'BAD_REQUEST');
    assert.match(JSON.parse(noHost.body).error, /Host header/);

    const garbage = await rawExchange(port, 'THIS IS NOT HTTP\r\n\r\n');
    assertDocumentedError(garbage, 400, 'BAD_REQUEST');

    const cookie = `Cookie: ${'a'.repeat(20_000)}\r\n`;
    const oversized = await rawExchange(port, `GET /healthz HTTP/1.1\r\nHost: x\r\n${cookie}\r\n`);
    assertDocumentedError(oversized, 431, 'HEADERS_TOO_LARGE');

    const badUrl = await rawExchange(
      port,
      'GET /webhooks/%E0%A4%A HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    assertDocumentedError(badUrl, 400, 'BAD_REQUEST');
    assert.match(JSON.parse(badUrl.body).error, /URL is malformed/);
  });
});

describe('secrets in logs', () => {
  test('a webhook Node refuses before routing leaves no signature in the logs, even at trace', async (t) => {
    const { logger, lines } = capturedLogger({ name: 'receiver', level: 'trace' });
    const redis = await privateRedis(t);
    const receiver = await startReceiver(
      receiverSettings(
        loadConfig({
          REDIS_URL: redis.url,
          H2H_API_SECRET: SECRET,
          PORT: '0',
          H2H_RECEIVER_METRICS_PORT: '0',
        }),
      ),
      { logger },
    );
    t.after(() => receiver.close());
    const body = webhookBody();
    const headers = deliveryHeaders(body);
    const request =
      `POST /webhooks/h2h HTTP/1.1\r\nHost: x\r\nX-Timestamp: ${headers['x-timestamp']}\r\n` +
      `X-Signature: ${headers['x-signature']}\r\nX-Pad: ${'p'.repeat(20_000)}\r\n\r\n`;

    assertDocumentedError(await rawExchange(portOf(receiver), request), 431, 'HEADERS_TOO_LARGE');
    assertDocumentedError(
      await rawExchange(portOf(receiver), `BROKEN ${headers['x-signature']}\r\n\r\n`),
      400,
      'BAD_REQUEST',
    );

    assert.ok(
      lines.some((line) => line.includes('request refused before routing')),
      'the refusals are logged',
    );
    assert.equal(lines.join('').includes(headers['x-signature']!), false, 'the signature is in the logs');
  });
});

describe('slow and stalled requests are cut off', () => {
  test('a chunked body trickled a byte at a time is answered 408 and its connection closed', async (t) => {
    const receiver = await receiverWith(t, {
      H2H_RECEIVER_REQUEST_TIMEOUT_MS: '600',
      H2H_RECEIVER_HEADERS_TIMEOUT_MS: '300',
    });
    const body = webhookBody();
    const headers = Object.entries({ ...deliveryHeaders(body), host: 'x', 'transfer-encoding': 'chunked' })
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    let timer: NodeJS.Timeout | undefined;
    const outcome = await rawExchange(
      portOf(receiver),
      `POST /webhooks/h2h HTTP/1.1\r\n${headers}\r\n`,
      (socket) => {
        let sent = 0;
        // The slow client: one byte of body every 50 ms, for ever.
        timer = setInterval(() => {
          if (!socket.writable) return;
          socket.write(`1\r\n${body[sent % body.length]}\r\n`);
          sent += 1;
        }, 50);
      },
    );
    clearInterval(timer);

    assertDocumentedError(outcome, 408, 'REQUEST_TIMEOUT');
    assert.equal(await receiver.producer.webhookQueue.count(), 0, 'nothing was queued');
    await waitFor(async () => (await connections(receiver)) === 0, { message: 'no connection left' });
  });

  test('bodies stopped short of their Content-Length are cut off and the memory they pinned comes back', async (t) => {
    const receiver = await receiverWith(t, {
      H2H_RECEIVER_REQUEST_TIMEOUT_MS: '1500',
      H2H_RECEIVER_HEADERS_TIMEOUT_MS: '1000',
      H2H_RECEIVER_IDLE_TIMEOUT_MS: '60000',
    });
    const port = portOf(receiver);
    const stalled = 40;
    const sent = 90 * 1024;
    const head = `POST /webhooks/h2h HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Timestamp: 1\r\nX-Signature: ab\r\nContent-Length: ${200 * 1024}\r\n\r\n`;
    collectGarbage();
    const before = process.memoryUsage().arrayBuffers;

    // Every chunk the server received, watched without keeping it alive: the memory comes back
    // exactly when no chunk of a stalled body is reachable any more (a process-wide byte count
    // would also see whatever else the test process allocates meanwhile).
    let received = 0;
    const chunks: Array<WeakRef<Buffer>> = [];
    receiver.app.server.on('request', (request) =>
      request.on('data', (c: Buffer) => {
        received += c.length;
        chunks.push(new WeakRef(c));
      }),
    );
    const outcomes = Array.from({ length: stalled }, () =>
      rawExchange(port, Buffer.concat([Buffer.from(head), Buffer.alloc(sent, 0x20)])),
    );
    await waitFor(() => received >= stalled * sent, { message: 'every partial body received' });
    collectGarbage();
    const pinned = process.memoryUsage().arrayBuffers - before;
    assert.ok(pinned >= (stalled * sent) / 2, `the partial bodies pinned ${pinned} bytes while held`);

    const answers = await Promise.all(outcomes);
    for (const outcome of answers) assertDocumentedError(outcome, 408, 'REQUEST_TIMEOUT');
    await waitFor(async () => (await connections(receiver)) === 0, { message: 'no connection left' });
    // A WeakRef's target lives at least to the end of the job that read it: collect in later ones.
    const held = await waitFor(
      () => {
        collectGarbage();
        return chunks.every((chunk) => chunk.deref() === undefined);
      },
      { message: 'every chunk of the stalled bodies collected' },
    );
    assert.equal(held, true);
  });

  test('connections over the cap are closed at once; once one ends, a new one is served', async (t) => {
    const receiver = await receiverWith(t, { H2H_RECEIVER_MAX_CONNECTIONS: '3' });
    const port = portOf(receiver);
    const accepted: Socket[] = [];
    receiver.app.server.on('connection', (socket: Socket) => accepted.push(socket));
    const held = await Promise.all(
      Array.from({ length: 3 }, () => {
        const socket = connect(port, '127.0.0.1');
        socket.on('error', () => {});
        return new Promise<Socket>((resolve) => socket.once('connect', () => resolve(socket)));
      }),
    );
    await waitFor(() => accepted.length === 3, { message: '3 connections accepted' });

    const over = await rawExchange(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.equal(over.status, null, 'the connection over the cap got no answer: it was closed');

    held[0]!.destroy();
    await waitFor(async () => (await connections(receiver)) === 2, { message: 'one connection ended' });
    const res = await rawExchange(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.equal(res.status, 200);
    for (const socket of held) socket.destroy();
  });
});

describe('metrics are not on the webhook port', () => {
  test('GET /metrics is 404 on the webhook port and served on the loopback metrics port, offset per pm2 instance', async (t) => {
    // Other test files bind free ports meanwhile: both of the pair must be free.
    const base = await freePortPair();
    const receiver = await receiverWith(t, { H2H_RECEIVER_METRICS_PORT: String(base) }, {});
    const body = webhookBody();
    assert.equal(
      (await httpRequest(receiver.webhookUrl, { rawBody: body, headers: deliveryHeaders(body) })).status,
      200,
    );

    const onWebhookPort = await httpRequest(`${receiver.origin}/metrics`, { method: 'GET' });
    assert.equal(onWebhookPort.status, 404);
    assert.equal((onWebhookPort.body as { message: string }).message, 'NOT_FOUND');

    assert.equal(receiver.metricsUrl, `http://127.0.0.1:${base}/metrics`);
    const scraped = await httpRequest(receiver.metricsUrl!, { method: 'GET' });
    assert.equal(scraped.status, 200);
    assert.match(scraped.text, /^h2h_webhook_requests_total\{outcome="accepted"\} 1$/m);

    const second = await receiverWith(
      t,
      { H2H_RECEIVER_METRICS_PORT: String(base) },
      { NODE_APP_INSTANCE: '1' },
    );
    assert.equal(second.metricsUrl, `http://127.0.0.1:${base + 1}/metrics`);
  });
});

/** Whether this process can listen on 127.0.0.1:`port` right now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port free together with the next one (pm2 instance 1 uses base + 1), as far as can be known. */
async function freePortPair(): Promise<number> {
  for (;;) {
    const base = await freePort();
    if (base < 65_535 && (await canListen(base + 1))) return base;
  }
}

function connections(receiver: RunningReceiver): Promise<number> {
  return new Promise((resolve, reject) =>
    receiver.app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
  );
}

describe('random requests', () => {
  test('every malformed or unsigned request, framing and URL included, gets a documented 4xx, never a 2xx or 5xx', async (t) => {
    const receiver = await receiverWith(t, {
      H2H_RECEIVER_REQUEST_TIMEOUT_MS: '2000',
      H2H_RECEIVER_HEADERS_TIMEOUT_MS: '1000',
    });
    const port = portOf(receiver);
    const documented = new Set([400, 401, 404, 408, 413, 415, 431]);
    const token = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/);
    const anyText = fc.string({ unit: 'binary', maxLength: 40 });
    const request = fc.oneof(
      // Random bytes where a request should be.
      fc.uint8Array({ minLength: 1, maxLength: 200 }).map((bytes) => Buffer.from(bytes)),
      // Request-shaped, with random parts.
      fc
        .record({
          method: fc.oneof(fc.constantFrom('POST', 'GET', 'PUT', 'DELETE', 'OPTIONS'), token),
          path: fc.oneof(
            fc.constant('/webhooks/h2h'),
            fc.constantFrom('/webhooks/h2h?x=%', '/%E0%A4%A', '/webhooks/%ZZ', '//', '/healthz/../metrics'),
            anyText.map((s) => `/${encodeURIComponent(s).slice(0, 60)}`),
          ),
          version: fc.constantFrom('HTTP/1.1', 'HTTP/1.0', 'HTTP/9.9', ''),
          host: fc.boolean(),
          headers: fc.array(fc.tuple(fc.oneof(token, anyText), anyText), { maxLength: 4 }),
          contentType: fc.constantFrom(
            undefined,
            'application/json',
            'application/merge-patch+json; charset=utf-8',
            'text/plain',
            'application/x-www-form-urlencoded',
          ),
          signature: fc.option(
            fc.tuple(fc.integer({ min: 0, max: 2 ** 31 }), fc.stringMatching(/^[0-9a-f]{0,64}$/)),
          ),
          hugeHeader: fc.boolean(),
          body: anyText,
        })
        .map((r) => {
          const lines = [`${r.method} ${r.path}${r.version ? ` ${r.version}` : ''}`];
          if (r.host) lines.push('Host: 127.0.0.1');
          if (r.contentType) lines.push(`Content-Type: ${r.contentType}`);
          if (r.signature) lines.push(`X-Timestamp: ${r.signature[0]}`, `X-Signature: ${r.signature[1]}`);
          for (const [name, value] of r.headers) lines.push(`${name}: ${value}`);
          if (r.hugeHeader) lines.push(`X-Pad: ${'p'.repeat(20_000)}`);
          const body = Buffer.from(r.body, 'latin1');
          lines.push(`Content-Length: ${body.length}`, 'Connection: close');
          return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), body]);
        }),
    );

    await fc.assert(
      fc.asyncProperty(request, async (bytes) => {
        const outcome = await rawExchange(port, bytes);
        if (outcome.status === null) return; // the connection was closed without an answer
        assert.ok(
          documented.has(outcome.status),
          `status ${outcome.status} for ${JSON.stringify(bytes.toString('latin1').slice(0, 120))}`,
        );
        assertDocumentedError(outcome, outcome.status, JSON.parse(outcome.body).message);
      }),
      { numRuns: 150 },
    );
    assert.equal(await receiver.producer.webhookQueue.count(), 0, 'nothing unsigned was queued');
  });
});
