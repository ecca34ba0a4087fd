import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { startRedisServer } from '../../src/dev/redis-server.js';

test('a private redis-server answers on its own port, survives pause/resume with AOF, and cleans up', async (t) => {
  const server = await startRedisServer();
  t.after(() => server.stop());
  const redis = new Redis(server.url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  await redis.connect();
  await redis.set('k', 'v');
  assert.equal(await redis.config('GET', 'maxmemory-policy').then((r) => (r as string[])[1]), 'noeviction');
  await redis.call('CONFIG', 'SET', 'appendfsync', 'always');
  await redis.set('k2', 'v2');
  redis.disconnect();

  await server.pause();
  await server.resume();
  const again = new Redis(server.url, { maxRetriesPerRequest: 0 });
  t.after(() => again.disconnect());
  assert.equal(await again.get('k2'), 'v2');

  again.disconnect();
  await server.stop();
  assert.equal(existsSync(server.dir), false);
});

test('two private servers never share a port', async (t) => {
  const [a, b] = await Promise.all([startRedisServer(), startRedisServer()]);
  t.after(() => Promise.all([a.stop(), b.stop()]));
  assert.notEqual(a.port, b.port);
});
