import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCliLoggingModules } from '../helpers/cli.js';
import { privateRedis } from '../helpers/redis.js';
import { tempStore } from '../helpers/store.js';

/** The queue, the HTTP client, the HTTP server and both database drivers: what only some commands need. */
const HEAVY = ['bullmq', 'ioredis', 'undici', 'fastify', 'postgres', 'better-sqlite3'];

const heavyAmong = (packages: string[]) => HEAVY.filter((name) => packages.includes(name));

test('--help lists every command and loads none of their implementations', async () => {
  const help = await runCliLoggingModules(['--help'], {});

  assert.equal(help.code, 0, help.stderr);
  for (const command of [
    'api',
    'demo',
    'order',
    'receiver',
    'report',
    'sim',
    'status',
    'tail',
    'tokens',
    'worker',
  ]) {
    assert.match(help.stdout, new RegExp(`^ {2}${command} `, 'm'), `${command} in --help`);
  }
  assert.deepEqual(heavyAmong(help.packages), []);
});

test("a command's --help shows its options without loading its implementation", async () => {
  const help = await runCliLoggingModules(['order', 'create', '--help'], {});

  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /--product <code>/);
  assert.match(help.stdout, /--user-id <id>/);
  assert.deepEqual(heavyAmong(help.packages), []);
});

test('tokens list on a SQLite store loads the SQLite driver and nothing of the queue, HTTP or PostgreSQL', async (t) => {
  const { store, path } = await tempStore(t);
  const { info } = await store.tokens.create('web shop', ['orders:read']);

  const list = await runCliLoggingModules(['tokens', 'list'], { H2H_DB_PATH: path });

  assert.equal(list.code, 0, list.stderr);
  assert.match(list.stdout, new RegExp(`${info.id}.*web shop`));
  assert.deepEqual(heavyAmong(list.packages), ['better-sqlite3']);
});

test('a command whose logs are JSON does not load pino-pretty; one whose logs are pretty does', async (t) => {
  const { path } = await tempStore(t);
  const loaded = async (LOG_FORMAT: string) => {
    const run = await runCliLoggingModules(['tokens', 'list'], { H2H_DB_PATH: path, LOG_FORMAT });
    assert.equal(run.code, 0, run.stderr);
    return run.packages.includes('pino-pretty');
  };

  // `auto` is JSON here: the CLI logs to stderr, a pipe, not a terminal.
  assert.deepEqual(
    [await loaded('json'), await loaded('auto'), await loaded('pretty')],
    [false, false, true],
  );
});

test('tokens list on a PostgreSQL URL loads the PostgreSQL driver, not the SQLite one', async () => {
  // Nothing listens on port 1: the driver is loaded, the connection refused.
  const list = await runCliLoggingModules(['tokens', 'list'], {
    H2H_DB_URL: 'postgres://h2h@127.0.0.1:1/h2h',
  });

  assert.equal(list.code, 2, list.stderr);
  assert.match(list.stderr, /127\.0\.0\.1:1/);
  assert.deepEqual(heavyAmong(list.packages), ['postgres']);
});

test('status reads the queues and the rate budget without loading the HTTP client or server', async (t) => {
  const redis = await privateRedis(t);
  const { path } = await tempStore(t);

  const status = await runCliLoggingModules(['status', '--json'], {
    H2H_DB_PATH: path,
    REDIS_URL: redis.url,
    H2H_API_KEY: 'key-for-the-budget',
  });

  assert.equal(status.code, 0, status.stderr);
  assert.ok('budget' in JSON.parse(status.stdout), 'the budget is reported');
  assert.deepEqual(heavyAmong(status.packages), ['bullmq', 'ioredis', 'better-sqlite3']);
});
