import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { DEFAULT_DB_PATH, loadConfig } from '../../src/config/config.js';
import { BUILT_CLI, runCli } from '../helpers/cli.js';
import { privateRedis } from '../helpers/redis.js';

const root = resolve(import.meta.dirname, '..', '..');

test('usage errors exit 2 (a configuration problem), help exits 0', async () => {
  for (const args of [['no-such-command'], ['order', 'list', '--no-such-flag'], ['order', 'show']]) {
    const run = await runCli(args, {});
    assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stderr, /error: /);
  }
  assert.equal((await runCli(['--help'], {})).code, 0);
});

test('commands about existing orders refuse to create a store: "no store at PATH", exit 2, no file made', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'h2h-nostore-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const dbPath = join(dir, 'nested', 'h2h-sync.db');
  for (const args of [
    ['order', 'list'],
    ['order', 'show', 'r-1'],
    ['status', '--json'],
  ]) {
    const run = await runCli(args, { H2H_DB_PATH: dbPath, REDIS_URL: 'redis://127.0.0.1:9' });
    assert.equal(run.code, 2, args.join(' '));
    assert.match(
      run.stderr + run.stdout,
      new RegExp(`no store at ${dbPath.replaceAll('.', '\\.')}: set H2H_DB_URL \\(or H2H_DB_PATH\\)`),
    );
  }
  assert.equal(existsSync(join(dir, 'nested')), false, 'nothing was created');
});

test('the default store is var/h2h-sync.db in the installation, wherever the command runs; the default Redis is the private one', () => {
  assert.equal(DEFAULT_DB_PATH, join(root, 'var', 'h2h-sync.db'));
  assert.equal(loadConfig({}).dbUrl, `sqlite://${DEFAULT_DB_PATH}`);
  assert.equal(loadConfig({ H2H_DB_PATH: 'rel/x.db' }).dbUrl, `sqlite://${resolve('rel/x.db')}`);
  assert.equal(loadConfig({}).redisUrl, 'redis://127.0.0.1:6380');
  assert.equal(loadConfig({ H2H_PRIVATE_REDIS_PORT: '6390' }).redisUrl, 'redis://127.0.0.1:6390');
  assert.equal(loadConfig({ REDIS_URL: 'redis://db:6379' }).redisUrl, 'redis://db:6379');
});

test('a receiver whose port is taken exits 2 naming the port and the fix', async (t) => {
  const redis = await privateRedis(t);
  const blocker = createServer();
  await new Promise<void>((done) => blocker.listen(0, '127.0.0.1', done));
  t.after(() => blocker.close());
  const port = (blocker.address() as { port: number }).port;

  const run = await runCli(['receiver'], {
    H2H_API_SECRET: 's',
    REDIS_URL: redis.url,
    PORT: String(port),
    H2H_RECEIVER_METRICS_PORT: '0',
  });

  assert.equal(run.code, 2);
  assert.match(
    run.stderr,
    new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port} \\(EADDRINUSE\\): another process listens there`),
  );
});

test('a service that fails at start-up exits with its code even with an IPC channel open, as under pm2', async () => {
  const cases = [
    ['receiver', { H2H_API_SECRET: '' }, /H2H_API_SECRET must be set/],
    ['worker', { H2H_WORKER_CONCURRENCY: '0' }, /H2H_WORKER_CONCURRENCY="0" is not valid/],
  ] as const;
  for (const [command, env, named] of cases) {
    const child = spawn(process.execPath, [BUILT_CLI, command], {
      env: { PATH: process.env.PATH ?? '', REDIS_URL: 'redis://127.0.0.1:9', ADMIN_PORT: '0', ...env },
      // The IPC channel pm2 opens to each app keeps a process alive after its work is done.
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    let stderr = '';
    child.stderr!.on('data', (chunk) => {
      stderr += chunk;
    });
    const code = await new Promise<number | null>((done) => child.once('exit', done));
    assert.equal(code, 2, `${command}: ${stderr}`);
    assert.match(stderr, named);
  }
});
