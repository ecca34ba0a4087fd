import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { settingsSchema } from '../../src/config/config.js';
import { freePort } from '../../src/dev/redis-server.js';
import { jobIdFor } from '../../src/queue/job-ids.js';
import { WEBHOOK_QUEUE } from '../../src/queue/webhook-queue.js';
import { signedWebhookHeaders } from '../../src/upstream/signature.js';
import { privateRedis } from '../helpers/redis.js';
import { otherConnection, snapshot } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope, webhookBodyOf } from '../helpers/worker.js';

const root = join(import.meta.dirname, '..', '..');
const PM2 = join(root, 'node_modules', 'pm2', 'bin', 'pm2');
const SECRET = 'whsec_pm2_reload_proof';

interface Pm2Process {
  name: string;
  pid: number;
  pm2_env: { status: string; exec_mode: string };
}

/** Runs the pm2 CLI to its end under a private PM2_HOME; rejects with its output on failure. */
function pm2(env: NodeJS.ProcessEnv, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [PM2, ...args], {
      cwd: root,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
    });
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve(output) : reject(new Error(`pm2 ${args.join(' ')} exited ${code}:\n${output}`)),
    );
  });
}

const processes = async (env: NodeJS.ProcessEnv): Promise<Pm2Process[]> =>
  JSON.parse(await pm2(env, 'jlist')) as Pm2Process[];

// The ecosystem reads the settings schema from dist/ and pm2 runs dist/cli/main.js: the build
// scripts/run-tests.mjs makes before the tests.

interface Ecosystem {
  apps: Array<Record<string, unknown>>;
}

/**
 * Loads an ecosystem file as pm2 7 does (lib/Common.js: require() of an ES module, Node >= 20.19)
 * under `env` (a variable set to undefined is removed), in a process of its own as pm2 does:
 * Node keeps an ES module that require() loaded for the life of the process, so a second load in
 * one process would not read the new environment. Throws what the file threw (message and code).
 */
function loadEcosystem(
  env: Record<string, string | undefined>,
  path = join(root, 'ecosystem.config.js'),
): Ecosystem {
  const childEnv = { ...process.env };
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) delete childEnv[name];
    else childEnv[name] = value;
  }
  const loader = `
    let result;
    try { result = { apps: require(process.argv[1]).apps }; }
    catch (error) { result = { error: { message: error.message, code: error.code } }; }
    process.stdout.write(JSON.stringify(result));`;
  const child = spawnSync(process.execPath, ['-e', loader, path], { env: childEnv, encoding: 'utf8' });
  assert.equal(child.status, 0, child.stderr);
  const result = JSON.parse(child.stdout) as Ecosystem | { error: { message: string; code?: string } };
  if ('error' in result) throw Object.assign(new Error(result.error.message), { code: result.error.code });
  return result;
}

test('ecosystem.config.js names every setting of the schema, runs the receiver in cluster and the worker in fork mode, and adds h2h-redis only without REDIS_URL', () => {
  const own = loadEcosystem({ REDIS_URL: 'redis://127.0.0.1:6399' });
  assert.deepEqual(
    own.apps.map((app) => [app.name, app.exec_mode, app.instances]),
    [
      ['h2h-receiver', 'cluster', 2],
      ['h2h-worker', 'fork', 1],
      ['h2h-api', 'fork', 1],
    ],
  );
  for (const app of own.apps) {
    assert.equal(app.script, 'dist/cli/main.js');
    assert.equal(app.wait_ready, true);
    assert.notEqual(app.time, true, 'pino stamps every line: pm2 must not add a second timestamp');
    assert.ok((app.listen_timeout as number) >= 10_000);
    assert.ok((app.kill_timeout as number) > 11_000, 'kill_timeout above the drain time');
    for (const block of ['env', 'env_production'] as const) {
      const env = app[block] as Record<string, string>;
      assert.deepEqual(
        Object.keys(env)
          .filter((name) => name !== 'NODE_ENV')
          .sort(),
        Object.keys(settingsSchema.shape).sort(),
        `${app.name}.${block} names every setting`,
      );
      assert.equal(env.REDIS_URL, 'redis://127.0.0.1:6399');
      assert.equal(env.H2H_API_SECRET, process.env.H2H_API_SECRET ?? '');
    }
    assert.equal((app.env_production as Record<string, string>).H2H_BASE_URL, process.env.H2H_BASE_URL ?? '');
  }
  const withPrivateRedis = loadEcosystem({ REDIS_URL: undefined });
  assert.deepEqual(
    withPrivateRedis.apps.map((app) => app.name),
    ['h2h-redis', 'h2h-receiver', 'h2h-worker', 'h2h-api'],
  );
  const redisApp = withPrivateRedis.apps[0]!;
  const args = (redisApp.args as string[]).join(' ');
  assert.match(args, /--bind 127\.0\.0\.1/);
  assert.match(args, /--appendonly yes/);
  assert.match(args, /--maxmemory-policy noeviction/);
  assert.match(args, /--port 6380/);
  const worker = withPrivateRedis.apps[2]!;
  assert.equal((worker.env as Record<string, string>).REDIS_URL, 'redis://127.0.0.1:6380');
  // Behind Sentinel there is no private Redis, and REDIS_URL (credentials, scheme) goes on as set.
  const sentinel = loadEcosystem({
    REDIS_URL: undefined,
    H2H_REDIS_SENTINELS: '10.0.0.1:26379,10.0.0.2:26379',
    H2H_REDIS_SENTINEL_MASTER: 'h2h',
  });
  assert.deepEqual(
    sentinel.apps.map((app) => [app.name, (app.env as Record<string, string>).REDIS_URL]),
    [
      ['h2h-receiver', ''],
      ['h2h-worker', ''],
      ['h2h-api', ''],
    ],
  );
});

test('ecosystem.config.js validates the environment with the settings schema: its values size the apps, and a bad one stops pm2 start naming the variable', () => {
  const sized = loadEcosystem({
    REDIS_URL: undefined,
    H2H_RECEIVER_INSTANCES: '3',
    H2H_PRIVATE_REDIS_PORT: '6390',
    H2H_SHUTDOWN_TIMEOUT_MS: '20000',
    H2H_WORKER_SHUTDOWN_TIMEOUT_MS: '30000',
  });
  const [redisApp, receiver, worker] = sized.apps;
  assert.match((redisApp!.args as string[]).join(' '), /--port 6390/);
  assert.equal(receiver!.instances, 3);
  assert.ok((receiver!.kill_timeout as number) > 20_000, 'receiver kill_timeout above its drain');
  assert.ok(
    (worker!.kill_timeout as number) > 31_000,
    'worker kill_timeout above its stop and the store close',
  );
  assert.equal((worker!.env as Record<string, string>).REDIS_URL, 'redis://127.0.0.1:6390');

  for (const [env, named] of [
    [{ H2H_RECEIVER_INSTANCES: '0' }, /H2H_RECEIVER_INSTANCES="0" is not valid/],
    [{ H2H_WORKER_SHUTDOWN_TIMEOUT_MS: 'soon' }, /H2H_WORKER_SHUTDOWN_TIMEOUT_MS="soon" is not valid/],
    [{ ADMIN_HOST: '0.0.0.0' }, /ADMIN_HOST=0\.0\.0\.0 is not loopback: set ADMIN_USER and ADMIN_PASSWORD/],
  ] as const) {
    assert.throws(
      () => loadEcosystem(env),
      (error: unknown) =>
        (error as { code?: string }).code === 'CONFIG_INVALID' && named.test((error as Error).message),
      JSON.stringify(env),
    );
  }
});

test('an ecosystem without a build says to run npm run build first', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'h2h-ecosystem-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  copyFileSync(join(root, 'ecosystem.config.js'), join(dir, 'ecosystem.config.js'));
  assert.throws(() => loadEcosystem({}, join(dir, 'ecosystem.config.js')), {
    message: /dist\/config\/config\.js is missing: run `npm run build` first/,
  });
});

test('pm2 reload of the receivers and the worker under a steady stream of signed webhooks loses none: every 2xx is a job and an applied event', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const home = mkdtempSync(join(tmpdir(), 'h2h-pm2-'));
  t.after(() => rmSync(home, { recursive: true, force: true }));
  const port = await freePort();
  const dbPath = join(home, 'var', 'h2h-sync.db');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PM2_HOME: join(home, 'pm2'),
    REDIS_URL: redis.url,
    H2H_DB_PATH: dbPath,
    PORT: String(port),
    H2H_API_SECRET: SECRET,
    H2H_RECEIVER_INSTANCES: '2',
    RECONCILE_ENABLED: 'false',
    ADMIN_PORT: String(await freePort()),
    API_PORT: String(await freePort()),
    LOG_LEVEL: 'warn',
  };
  // Registered after Redis, so it runs before Redis stops: nothing is left running.
  t.after(() => pm2(env, 'kill'));
  await pm2(env, 'start', 'ecosystem.config.js', '--env', 'production');
  const started = await processes(env);
  assert.deepEqual(started.map((p) => [p.name, p.pm2_env.status]).sort(), [
    ['h2h-api', 'online'],
    ['h2h-receiver', 'online'],
    ['h2h-receiver', 'online'],
    ['h2h-worker', 'online'],
  ]);

  const url = `http://127.0.0.1:${port}/webhooks/h2h`;
  const accepted = new Set<string>();
  const answers = new Map<string, number>();
  let retries = 0;
  let sequence = 0;
  /** One delivery, retried as the upstream's dispatcher would on a 503 or a dropped connection. */
  const deliver = async () => {
    const eventId = `evt_pm2_${++sequence}`;
    const body = webhookBodyOf(
      snapshot(`ref-${eventId}`, 'SUCCESS', { serial_number: `SN-${eventId}` }),
      eventId,
    );
    for (let attempt = 1; attempt <= 20; attempt++) {
      let status: string;
      try {
        const response = await fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-event-id': eventId,
            'x-event-type': 'order.updated',
            ...signedWebhookHeaders(SECRET, body),
          },
          body,
        });
        await response.arrayBuffer();
        status = String(response.status);
        if (response.ok) {
          accepted.add(eventId);
          answers.set(status, (answers.get(status) ?? 0) + 1);
          return;
        }
      } catch (error) {
        status = `connection error (${(error as Error & { cause?: { code?: string } }).cause?.code ?? (error as Error).message})`;
      }
      answers.set(status, (answers.get(status) ?? 0) + 1);
      assert.ok(status === '503' || status.startsWith('connection error'), `unexpected answer ${status}`);
      retries++;
    }
    assert.fail(`${eventId} was never accepted`);
  };
  let sending = true;
  const senders = Array.from({ length: 8 }, async () => {
    while (sending) await deliver();
  });

  await waitFor(() => accepted.size >= 200, {
    timeoutMs: 15_000,
    message: 'the first 200 accepted webhooks',
  });
  await pm2(env, 'reload', 'h2h-receiver');
  const afterReceiverReload = accepted.size;
  await pm2(env, 'reload', 'h2h-worker');
  await waitFor(() => accepted.size >= afterReceiverReload + 200, {
    timeoutMs: 15_000,
    message: '200 more webhooks after the reloads',
  });
  sending = false;
  await Promise.all(senders);

  const reloaded = await processes(env);
  const pids = (list: Pm2Process[], name: string) =>
    new Set(list.filter((p) => p.name === name).map((p) => p.pid));
  for (const name of ['h2h-receiver', 'h2h-worker']) {
    const before = pids(started, name);
    const after = pids(reloaded, name);
    assert.equal(after.size, before.size);
    for (const pid of after) assert.ok(!before.has(pid), `${name} was replaced by the reload`);
  }

  const connection = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  const queue = new Queue(WEBHOOK_QUEUE, { connection });
  t.after(async () => {
    await queue.close();
    connection.disconnect();
  });
  const db = await otherConnection(dbPath);
  t.after(() => db.close());
  const applied = db.prepare(
    "SELECT COUNT(DISTINCT event_id) AS n FROM order_events WHERE source = 'webhook'",
  );
  await waitFor(() => (applied.get() as { n: number }).n >= accepted.size, {
    timeoutMs: 20_000,
    message: 'the worker to apply every accepted webhook',
  });
  const appliedIds = new Set(
    (
      db.prepare("SELECT event_id FROM order_events WHERE source = 'webhook'").all() as Array<{
        event_id: string;
      }>
    ).map((row) => row.event_id),
  );
  const lost = [...accepted].filter((id) => !appliedIds.has(id));
  const jobs = await Promise.all([...accepted].map((id) => queue.getJob(jobIdFor('ev', id))));
  const missingJobs = [...accepted].filter((_, i) => !jobs[i]);
  test.diagnostic(
    `accepted ${accepted.size} webhooks; answers ${JSON.stringify(Object.fromEntries(answers))}; retried ${retries}; jobs missing ${missingJobs.length}; not applied ${lost.length}`,
  );
  assert.deepEqual(missingJobs, []);
  assert.deepEqual(lost, []);
});

test('under pm2 a receiver without its secret is not left online: it exits 2, pm2 restarts it a bounded number of times, then shows it errored with the variable in its log', async (test) => {
  const t = cleanupScope(test);
  const home = mkdtempSync(join(tmpdir(), 'h2h-pm2-bad-'));
  t.after(() => rmSync(home, { recursive: true, force: true }));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PM2_HOME: join(home, 'pm2'),
    REDIS_URL: 'redis://127.0.0.1:9',
    H2H_API_SECRET: '',
    PORT: String(await freePort()),
    H2H_RECEIVER_INSTANCES: '1',
    H2H_RECEIVER_METRICS_PORT: '0',
  };
  t.after(() => pm2(env, 'kill'));
  // pm2 start itself reports the app as launched; what matters is where it ends.
  await pm2(env, 'start', 'ecosystem.config.js', '--only', 'h2h-receiver').catch(() => '');

  const receiver = await waitFor(
    async () =>
      (await processes(env)).find((p) => p.name === 'h2h-receiver' && p.pm2_env.status === 'errored'),
    { timeoutMs: 90_000, intervalMs: 500, message: 'the receiver marked errored' },
  );
  const restarts = (receiver.pm2_env as { restart_time?: number }).restart_time ?? 0;
  assert.ok(restarts >= 1 && restarts <= 10, `restarted ${restarts} times, within the bound`);
  const logs = await pm2(env, 'logs', 'h2h-receiver', '--nostream', '--lines', '40');
  assert.match(logs, /H2H_API_SECRET must be set/);
});
