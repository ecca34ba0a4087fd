import assert from 'node:assert/strict';
import { connect, createServer } from 'node:net';
import { test } from 'node:test';
import { startAdminServer } from '../../src/admin/admin-server.js';
import { adminSettings, ConfigError, loadConfig } from '../../src/config/config.js';
import { freePort } from '../../src/dev/redis-server.js';
import { startWorkerProcess } from '../../src/worker/server.js';
import { capturedLogger } from '../helpers/logs.js';
import { privateRedis } from '../helpers/redis.js';
import { startSimulator } from '../helpers/simulator.js';
import { tempDbPath } from '../helpers/store.js';
import { twoSimulatedUpstreams } from '../helpers/upstreams.js';
import { cleanupScope } from '../helpers/worker.js';

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

test('the worker process serves Bull Board with the three queues, /healthz and /metrics with reconciler, worker and queue figures', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const sim = await startSimulator(t);
  const port = await freePort();
  const config = loadConfig({
    REDIS_URL: redis.url,
    H2H_DB_PATH: tempDbPath(t),
    H2H_BASE_URL: sim.sim.baseUrl,
    H2H_API_KEY: sim.member.api_key,
    ADMIN_PORT: String(port),
  });
  const worker = await startWorkerProcess(config, { admin: true });
  t.after(() => worker.close());
  assert.equal(worker.admin?.url, `http://127.0.0.1:${port}`);
  const base = worker.admin.url;

  const page = await fetch(`${base}/admin/queues`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type') ?? '', /text\/html/);
  const html = await page.text();
  assert.match(html, /<html/i);
  // The page's own scripts and styles come from @fastify/static (pinned in package.json overrides).
  const assets = [...html.matchAll(/(?:src|href)="(static\/[^"]+)"/g)].map((m) => m[1] ?? '');
  assert.ok(assets.some((a) => a.endsWith('.js')) && assets.some((a) => a.endsWith('.css')), html);
  for (const asset of assets) {
    const served = await fetch(`${base}/admin/queues/${asset}`);
    assert.equal(served.status, 200, asset);
    assert.ok((await served.arrayBuffer()).byteLength > 0, asset);
  }

  const api = await fetch(`${base}/admin/queues/api/queues`);
  assert.equal(api.status, 200);
  const { queues } = (await api.json()) as { queues: Array<{ name: string }> };
  assert.deepEqual(queues.map((q) => q.name).sort(), ['h2h-poll-requests', 'h2h-reconcile', 'h2h-webhooks']);

  const health = await fetch(`${base}/healthz`);
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { status: 'ok', redis: 'ok' });

  const metrics = await fetch(`${base}/metrics`);
  assert.equal(metrics.status, 200);
  const text = await metrics.text();
  assert.match(text, /^h2h_reconcile_polls_total\{upstream="default",outcome="changed"\} 0$/m);
  assert.match(text, /^h2h_reconcile_stuck_orders\{upstream="default"\} 0$/m);
  assert.match(text, /^h2h_worker_events_committed_total 0$/m);
  assert.match(text, /^h2h_queue_jobs\{queue="h2h-webhooks",state="waiting"\} 0$/m);
  assert.match(text, /^h2h_queue_jobs\{queue="h2h-reconcile",state="delayed"\} \d+$/m);
  assert.match(text, /^process_cpu_seconds_total /m);
});

test('with ADMIN_USER and ADMIN_PASSWORD every admin route needs them: 401 without or with wrong ones, 200 with them', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const admin = await startAdminServer({
    settings: { host: '127.0.0.1', port: 0, auth: { user: 'ops', password: 's3cret' } },
    redisUrl: redis.url,
  });
  t.after(() => admin.close());

  for (const path of ['/admin/queues', '/admin/queues/api/queues', '/metrics', '/healthz']) {
    const anonymous = await fetch(`${admin.url}${path}`);
    assert.equal(anonymous.status, 401, path);
    assert.match(anonymous.headers.get('www-authenticate') ?? '', /^Basic realm=/);
    const wrong = await fetch(`${admin.url}${path}`, { headers: { authorization: basic('ops', 'guess') } });
    assert.equal(wrong.status, 401, path);
    const right = await fetch(`${admin.url}${path}`, { headers: { authorization: basic('ops', 's3cret') } });
    assert.equal(right.status, 200, path);
    await right.arrayBuffer();
  }
});

test('a request Node refuses (a browser cookie over the header limit) gets 431 JSON, and even at trace no log line holds the admin password', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const { logger, lines } = capturedLogger({ name: 'worker', level: 'trace' });
  const admin = await startAdminServer({
    settings: { host: '127.0.0.1', port: 0, auth: { user: 'ops', password: 's3cret' } },
    redisUrl: redis.url,
    logger,
  });
  t.after(() => admin.close());

  const authorization = basic('ops', 's3cret');
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = connect(admin.port, '127.0.0.1', () =>
      socket.write(
        `GET /admin/queues HTTP/1.1\r\nHost: x\r\nAuthorization: ${authorization}\r\nCookie: ${'c'.repeat(20_000)}\r\n\r\n`,
      ),
    );
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk;
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });

  assert.match(answer, /^HTTP\/1\.1 431 /);
  assert.equal(JSON.parse(answer.split('\r\n\r\n')[1]!).error, 'HEADERS_TOO_LARGE');
  assert.ok(
    lines.some((line) => line.includes('request refused before routing')),
    'the refusal is logged',
  );
  const all = lines.join('');
  for (const secret of ['s3cret', authorization.slice(6), 'ccccccccccccccccccccccccccccccccccccc']) {
    assert.equal(all.includes(secret), false, `${secret.slice(0, 12)}… is in the logs`);
  }
});

test('a non-loopback ADMIN_HOST without credentials refuses to start, naming ADMIN_USER and ADMIN_PASSWORD', () => {
  assert.throws(
    () => loadConfig({ ADMIN_HOST: '0.0.0.0' }),
    (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.match(error.message, /ADMIN_HOST=0\.0\.0\.0 is not loopback: set ADMIN_USER and ADMIN_PASSWORD/);
      return true;
    },
  );
  assert.throws(() => loadConfig({ ADMIN_USER: 'ops' }), {
    name: 'ConfigError',
    message: /ADMIN_USER and ADMIN_PASSWORD must be set together/,
  });
  assert.throws(
    () => loadConfig({ ADMIN_PASSWORD: 'hunter2' }),
    (error: unknown) =>
      error instanceof ConfigError &&
      /ADMIN_USER and ADMIN_PASSWORD must be set together/.test(error.message) &&
      !error.message.includes('hunter2'),
  );
  // Another host is fine with credentials, or without an admin server.
  assert.deepEqual(
    adminSettings(loadConfig({ ADMIN_HOST: '0.0.0.0', ADMIN_USER: 'ops', ADMIN_PASSWORD: 's3cret' })).auth,
    { user: 'ops', password: 's3cret' },
  );
  assert.equal(adminSettings(loadConfig({ ADMIN_HOST: '0.0.0.0', ADMIN_PORT: '0' })).port, 0);
});

test('an admin port already in use leaves the worker applying webhooks without the admin server', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
  const address = blocker.address();
  assert.ok(address && typeof address === 'object');
  const config = loadConfig({
    REDIS_URL: redis.url,
    H2H_DB_PATH: tempDbPath(t),
    RECONCILE_ENABLED: 'false',
    ADMIN_PORT: String(address.port),
  });
  const worker = await startWorkerProcess(config, { admin: true });
  t.after(() => worker.close());
  assert.equal(worker.admin, undefined);
  await worker.eventWorker.waitUntilReady();
});

test("with two upstreams, Bull Board and h2h_queue_jobs show each upstream's reconcile queue, and /metrics labels every reconciler series by upstream", async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const upstreams = await twoSimulatedUpstreams(t);
  const config = loadConfig({
    REDIS_URL: redis.url,
    H2H_DB_PATH: tempDbPath(t),
    ...upstreams.env,
    ADMIN_PORT: String(await freePort()),
  });
  const worker = await startWorkerProcess(config, { admin: true });
  t.after(() => worker.close());
  const base = worker.admin!.url;

  const { queues } = (await (await fetch(`${base}/admin/queues/api/queues`)).json()) as {
    queues: Array<{ name: string }>;
  };
  const text = await (await fetch(`${base}/metrics`)).text();

  assert.deepEqual(queues.map((q) => q.name).sort(), [
    'h2h-poll-requests',
    'h2h-reconcile',
    'h2h-reconcile-beta',
    'h2h-webhooks',
  ]);
  assert.match(text, /^h2h_queue_jobs\{queue="h2h-reconcile-beta",state="delayed"\} \d+$/m);
  for (const upstream of ['default', 'beta']) {
    assert.match(
      text,
      new RegExp(`^h2h_reconcile_polls_total\\{upstream="${upstream}",outcome="changed"\\} 0$`, 'm'),
    );
    assert.match(text, new RegExp(`^h2h_reconcile_stuck_orders\\{upstream="${upstream}"\\} 0$`, 'm'));
    assert.match(
      text,
      new RegExp(`^h2h_reconcile_circuit_open\\{upstream="${upstream}",cause="unauthorized"\\} 0$`, 'm'),
    );
  }
});
