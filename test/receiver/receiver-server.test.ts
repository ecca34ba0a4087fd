import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { test } from 'node:test';
import { loadConfig, receiverSettings } from '../../src/config/config.js';
import { startReceiver } from '../../src/receiver/server.js';
import { privateRedis } from '../helpers/redis.js';
import { httpRequest as undiciRequest } from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';
import { deliveryHeaders, SECRET, webhookBody } from './receiver-harness.js';

const baseEnv = (redisUrl: string) => ({
  REDIS_URL: redisUrl,
  H2H_API_SECRET: SECRET,
  PORT: '0',
  LOG_LEVEL: 'info',
});

test('a request in flight when the receiver closes is finished and queued; new connections are refused', async (t) => {
  const redis = await privateRedis(t);
  const receiver = await startReceiver(receiverSettings(loadConfig(baseEnv(redis.url))));
  t.after(() => receiver.close());
  const body = webhookBody();
  const headers = deliveryHeaders(body, { eventId: 'evt_in_flight' });
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

test('h2h-sync receiver reports ready to its parent, serves webhooks, and exits 0 on SIGTERM', async (t) => {
  const redis = await privateRedis(t);
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'receiver'], {
    env: { ...process.env, ...baseEnv(redis.url) },
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
  const body = webhookBody();
  const res = await undiciRequest(listening.url!, { rawBody: body, headers: deliveryHeaders(body) });
  assert.equal(res.status, 200);

  child.kill('SIGTERM');
  assert.equal(await exited, 0);
  assert.match(stdout, /receiver stopped/);
});

test('h2h-sync receiver without a webhook secret stops at once naming H2H_API_SECRET (exit 2)', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'receiver'], {
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
