import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { type TestContext, test } from 'node:test';
import { loadConfig, receiverSettings } from '../../src/config/config.js';
import { decodeWebhookRawBody } from '../../src/queue/webhook-queue.js';
import { startReceiver } from '../../src/receiver/server.js';
import { BUILT_CLI } from '../helpers/cli.js';
import { deliveryHeaders, SECRET, webhookBody } from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { httpRequest as undiciRequest } from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';

const baseEnv = (redisUrl: string) => ({
  REDIS_URL: redisUrl,
  H2H_API_SECRET: SECRET,
  PORT: '0',
  H2H_RECEIVER_METRICS_PORT: '0',
  LOG_LEVEL: 'info',
});

test('a request in flight when the receiver closes is finished and queued; new connections are refused', async (t) => {
  const redis = await privateRedis(t);
  const receiver = await startReceiver(receiverSettings(loadConfig(baseEnv(redis.url))));
  t.after(() => receiver.close());
  const body = webhookBody('in-flight-order', 'evt_in_flight');
  const headers = deliveryHeaders(body);
  const url = new URL(receiver.webhookUrl);
  const started = new Promise<void>((resolve) => receiver.app.server.once('request', () => resolve()));

  const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.write(body.slice(0, 10)); // the rest comes after close() has begun
    started.then(async () => {
      const closing = receiver.close();
      await waitFor(
        () =>
          undiciRequest(`${receiver.origin}/healthz`).then(
            () => false,
            (error: Error) => /ECONNREFUSED/.test(`${error.message} ${(error.cause as Error)?.message}`),
          ),
        { message: 'new connections refused' },
      );
      req.end(body.slice(10));
      await closing;
    }, reject);
  });

  const { status, text } = await answer;
  assert.equal(status, 200);
  assert.deepEqual(JSON.parse(text), { received: true, duplicate: false });
  await receiver.close();
  // The producer is closed now; read the job back through a fresh connection.
  const { createWebhookProducer } = await import('../../src/queue/webhook-producer.js');
  const reader = createWebhookProducer({ redisUrl: redis.url });
  t.after(() => reader.close());
  await reader.ping();
  assert.ok(await reader.webhookQueue.getJob('ev-evt_in_flight'));
});

/**
 * Starts `h2h-sync receiver` as pm2 would (an IPC channel for `ready`), killed when the test ends;
 * resolves once it said it is ready and where it listens.
 */
async function spawnReceiver(t: TestContext, env: Record<string, string>) {
  const child = spawn(process.execPath, [BUILT_CLI, 'receiver'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  t.after(() => child.kill('SIGKILL'));
  let stdout = '';
  child.stdout!.on('data', (chunk) => {
    stdout += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ready = new Promise<string>((resolve) => child.once('message', (m) => resolve(String(m))));

  assert.equal(await ready, 'ready');
  const listening = await waitFor(() =>
    stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { msg: string; url?: string })
      .find((line) => line.msg === 'receiver listening'),
  );
  return { child, exited, webhookUrl: listening.url!, stdout: () => stdout };
}

test('h2h-sync receiver reports ready to its parent, serves webhooks, and exits 0 on SIGTERM', async (t) => {
  const redis = await privateRedis(t);
  const receiver = await spawnReceiver(t, baseEnv(redis.url));

  const body = webhookBody();
  const res = await undiciRequest(receiver.webhookUrl, { rawBody: body, headers: deliveryHeaders(body) });
  assert.equal(res.status, 200);

  receiver.child.kill('SIGTERM');
  assert.equal(await receiver.exited, 0);
  assert.match(receiver.stdout(), /receiver stopped/);
});

test('h2h-sync receiver started with H2H_API_SECRET=new,old accepts webhooks signed with either secret and refuses any other', async (t) => {
  const redis = await privateRedis(t);
  const receiver = await spawnReceiver(t, { ...baseEnv(redis.url), H2H_API_SECRET: 'new-secret,old-secret' });
  const send = (secret: string) => {
    const body = webhookBody();
    return undiciRequest(receiver.webhookUrl, { rawBody: body, headers: deliveryHeaders(body, { secret }) });
  };

  const signedNew = await send('new-secret');
  const signedOld = await send('old-secret');
  const signedOther = await send('unknown-secret');

  assert.deepEqual([signedNew.status, signedNew.body], [200, { received: true, duplicate: false }]);
  assert.deepEqual(
    [signedOld.status, signedOld.body],
    [200, { received: true, duplicate: false }],
    'the old secret verifies until the rotation is over',
  );
  assert.equal(signedOther.status, 401);
  assert.equal((signedOther.body as { message: string }).message, 'INVALID_SIGNATURE');
});

test('h2h-sync receiver without a webhook secret stops at once naming H2H_API_SECRET (exit 2)', async () => {
  const child = spawn(process.execPath, [BUILT_CLI, 'receiver'], {
    env: { ...process.env, H2H_API_SECRET: '', PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  assert.equal(code, 2);
  assert.match(stderr, /H2H_API_SECRET must be set/);
});

/** POSTs `chunks` one write at a time without a content-length (chunked), as a proxy may. */
function postChunked(url: URL, headers: Record<string, string>, chunks: string[]) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers },
      (res) => {
        let text = '';
        res.on('data', (chunk) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    // The receiver may answer 413 and close before the last chunk is written.
    req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'EPIPE' ? undefined : reject(error)));
    for (const chunk of chunks) req.write(chunk);
    req.end();
  });
}

test('a chunked body without a content-length is read whole and queued; over the limit it is 413 and nothing is queued', async (t) => {
  const redis = await privateRedis(t);
  const receiver = await startReceiver(
    receiverSettings(loadConfig({ ...baseEnv(redis.url), H2H_WEBHOOK_BODY_LIMIT: '2048' })),
  );
  t.after(() => receiver.close());
  const url = new URL(receiver.webhookUrl);
  const split = (body: string) => [body.slice(0, 100), body.slice(100, 700), body.slice(700)];
  const small = JSON.stringify({
    event_id: 'evt_chunked',
    data: { partner_ref: 'chunked' },
    pad: 'a'.repeat(1500),
  });
  const big = JSON.stringify({
    event_id: 'evt_too_big',
    data: { partner_ref: 'too-big' },
    pad: 'a'.repeat(3000),
  });

  const accepted = await postChunked(url, deliveryHeaders(small), split(small));
  const refused = await postChunked(url, deliveryHeaders(big), split(big));

  assert.equal(accepted.status, 200, accepted.text);
  assert.equal(refused.status, 413, refused.text);
  assert.equal(JSON.parse(refused.text).message, 'PAYLOAD_TOO_LARGE');
  const job = await receiver.producer.webhookQueue.getJob('ev-evt_chunked');
  assert.equal(job && decodeWebhookRawBody(job.data).toString('utf8'), small);
  assert.equal(await receiver.producer.webhookQueue.getJob('ev-evt_too_big'), undefined);
});
