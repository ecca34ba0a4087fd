import assert from 'node:assert/strict';
import { test } from 'node:test';
import { freePort, startRedisServer } from '../../src/dev/redis-server.js';
import { redactRedisUrl } from '../../src/shared/redis-outage.js';
import { spawnCli } from '../helpers/cli.js';
import { tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';

type Line = { level: number; msg: string; attempt?: number; attempts?: number; redis?: string };

test('a worker started before Redis says "waiting for Redis" once, logs each attempt only at debug, raises nothing, and starts when Redis comes', async (t) => {
  const port = await freePort();
  const worker = spawnCli(t, ['worker'], {
    REDIS_URL: `redis://127.0.0.1:${port}`,
    H2H_DB_PATH: tempDbPath(t),
    ADMIN_PORT: '0',
    H2H_BASE_URL: 'http://127.0.0.1:9/v1/member-api',
    H2H_API_KEY: 'k',
    LOG_LEVEL: 'debug',
  });
  const lines = () => worker.jsonLines<Line>();

  await waitFor(() => lines().some((l) => l.msg === 'Redis not reachable' && (l.attempt ?? 0) >= 5), {
    message: 'five failed connection attempts',
  });
  const redis = await startRedisServer({ port });
  t.after(() => redis.stop());
  await waitFor(() => lines().some((l) => l.msg === 'worker taking webhook jobs'), {
    timeoutMs: 20_000,
    message: 'the worker started once Redis answered',
  });

  const waiting = lines().filter((l) => l.msg.startsWith('waiting for Redis'));
  assert.equal(waiting.length, 1, 'said once, not on every attempt');
  assert.equal(waiting[0]!.level, 40);
  assert.equal(waiting[0]!.redis, `redis://127.0.0.1:${port}`);
  assert.ok(lines().some((l) => l.msg.startsWith('Redis is reachable') && (l.attempts ?? 0) >= 5));
  assert.equal(lines().filter((l) => l.level >= 50).length, 0, 'no error lines');
  assert.equal(
    worker.stderr(),
    '',
    'nothing raw on stderr (no console.error of an unhandled connection error)',
  );
  assert.match(lines()[0]!.msg, /^worker starting: Redis redis:\/\/127\.0\.0\.1:\d+, store /);

  worker.child.kill('SIGTERM');
  assert.equal(await worker.exited, 0);
});

test('a Redis URL is logged without its password', () => {
  assert.equal(redactRedisUrl('redis://user:s3cret@db.example:6380/2'), 'redis://user:***@db.example:6380/2');
  assert.equal(redactRedisUrl('rediss://:s3cret@db.example'), 'rediss://:***@db.example');
  assert.equal(redactRedisUrl('redis://127.0.0.1:6380'), 'redis://127.0.0.1:6380');
});
