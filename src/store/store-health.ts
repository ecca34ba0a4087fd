import { Gauge, Registry } from 'prom-client';
import { withDeadline } from '../shared/deadline.js';
import type { SqlExecutor } from './sql/executor.js';

/** How long a scrape waits for the store's answer before it counts the store down: 2 s. */
export const STORE_PROBE_TIMEOUT_MS = 2_000;

/**
 * A registry with `h2h_store_up` (the worker serves it on the admin port): at each scrape, one read of the `orders` table (the
 * schema there and answering) within `timeoutMs` (default {@link STORE_PROBE_TIMEOUT_MS}): 1 when
 * it answered, 0 when it failed or took longer (PostgreSQL unreachable or failing over, a SQLite
 * file gone). A SQLite write lock does not count: WAL readers never wait for it.
 */
export function storeHealthMetrics(
  db: Pick<SqlExecutor, 'get'>,
  timeoutMs = STORE_PROBE_TIMEOUT_MS,
): Registry {
  const registry = new Registry();
  new Gauge({
    name: 'h2h_store_up',
    help: 'Whether the order store answered a read at this scrape within 2 s: 1 yes, 0 no.',
    registers: [registry],
    async collect() {
      try {
        await withDeadline(
          db.get('SELECT 1 AS up FROM orders LIMIT 1'),
          timeoutMs,
          () => new Error(`the store did not answer within ${timeoutMs} ms`),
        );
        this.set(1);
      } catch {
        this.set(0);
      }
    },
  });
  return registry;
}
