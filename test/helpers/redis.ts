import type { TestContext } from 'node:test';
import { type RedisServer, startRedisServer } from '../../src/dev/redis-server.js';

/** Starts a private redis-server for one test (or suite) and stops it when the test ends. */
export async function privateRedis(t: Pick<TestContext, 'after'>): Promise<RedisServer> {
  const server = await startRedisServer();
  t.after(() => server.stop());
  return server;
}
