import { Redis } from 'ioredis';
import { RateBudget } from '../../src/rate-budget/rate-budget.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { privateRedis } from './redis.js';
import type { TestSimulator } from './simulator.js';
import type { cleanupScope } from './worker.js';

/**
 * A client of the simulator's demo reseller drawing from a real budget in a private Redis, all
 * closed when `t` ends; with the budget (to read what calls took) and the Redis URL.
 */
export async function budgetedClient(t: ReturnType<typeof cleanupScope>, sim: TestSimulator) {
  const redis = await privateRedis(t);
  const connection = new Redis(redis.url);
  t.after(() => connection.quit());
  const budget = new RateBudget({ redis: connection, apiKey: sim.member.api_key });
  const client = new UpstreamClient({ baseUrl: sim.sim.baseUrl, apiKey: sim.member.api_key, budget });
  t.after(() => client.close());
  return { client, budget, redisUrl: redis.url, connection };
}
