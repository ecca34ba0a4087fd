// The plans of the store's hot queries on a volume store (bench/volume.ts --explain): SQLite's
// EXPLAIN QUERY PLAN, PostgreSQL's EXPLAIN. The texts are those of src/store (store-context.ts,
// order-queries.ts, order-claims.ts, feed.ts, notify-outbox.ts), with their parameters.
import type { OpenedStore } from '../src/store/open-store.js';
import { checkedAtSql, dueClaimSql } from '../src/store/order-claims.js';
import { openOrdersSql, orderPageQuery } from '../src/store/order-queries.js';

interface HotQuery {
  name: string;
  sql: string;
  params: Record<string, unknown>;
}

function hotQueries(
  store: OpenedStore,
  {
    ref,
    deepId,
    now,
    firstSeq,
  }: {
    ref: string;
    deepId: number;
    now: number;
    firstSeq: number;
  },
): HotQuery[] {
  return [
    {
      name: 'GET /v1/orders/:ref (store-context.ts, byEither)',
      sql: `SELECT * FROM orders WHERE id = (
  SELECT id FROM (
    SELECT id, 0 AS pick FROM orders WHERE partner_ref = @ref
    UNION ALL SELECT id, 1 AS pick FROM orders WHERE shop_ref = @ref
    UNION ALL SELECT id, 2 AS pick FROM orders WHERE invoice_number = @invoice
  ) AS found ORDER BY pick, id LIMIT 1)`,
      params: { ref, invoice: ref },
    },
    {
      name: 'GET /v1/orders?status=FAILED, deep cursor (pageOrders)',
      sql: 'SELECT * FROM orders WHERE status = @status AND id < @beforeId ORDER BY id DESC LIMIT @limit',
      params: { status: 'FAILED', beforeId: deepId, limit: 51 },
    },
    {
      name: 'GET /v1/orders?status=cancelled, none (pageOrders, schema 30)',
      ...orderPageQuery({ status: 'cancelled', limit: 50 }),
    },
    {
      name: 'GET /v1/events?after= (feed.after)',
      sql: 'SELECT * FROM feed_events WHERE seq > @after ORDER BY seq LIMIT @limit',
      params: { after: firstSeq, limit: 100 },
    },
    {
      name: 'status: orders by status (countByStatus)',
      sql: `SELECT status_key AS key, submission_state AS state, open, stuck, SUM(n) AS n FROM order_counts
       WHERE TRUE GROUP BY status_key, submission_state, open, stuck HAVING SUM(n) > 0`,
      params: {},
    },
    {
      name: 'status: oldest open order and due count (countByStatus)',
      sql: openOrdersSql(false),
      params: { now },
    },
    {
      name: "reconcile: its upstream's oldest open order and due count (countByStatus, schema 32)",
      sql: openOrdersSql(true),
      params: { now, upstream: 'default' },
    },
    {
      name: 'status: audit coverage (auditCoverage)',
      sql: `SELECT COUNT(*) AS n, SUM(CASE WHEN ${checkedAtSql(store.db)} > @checkedSince THEN 1 ELSE 0 END) AS checked
       FROM orders ${store.db.dialect.indexedBy('orders_success_final')} WHERE status = 'SUCCESS' AND final_at >= @finalSince`,
      params: { finalSince: now - 7 * 86_400_000, checkedSince: now - 86_400_000 },
    },
    {
      name: 'reconcile: claim due orders (claimDueForPoll)',
      sql: dueClaimSql(''),
      params: { dueBy: now, now, upstream: 'default', limit: 10 },
    },
    {
      name: 'worker apply: event dedupe (order-writer.ts, EVENT_BY_KEY)',
      sql: `SELECT partner_ref FROM order_events
  WHERE source = @source AND upstream = @upstream AND event_id = @eventId`,
      params: { source: 'webhook', upstream: 'default', eventId: 'evt-x' },
    },
    {
      name: 'feed prune (feed.prune)',
      sql: 'DELETE FROM feed_events WHERE timestamp < @before',
      params: { before: now - 30 * 86_400_000 },
    },
  ];
}

/** Each hot query's plan, as text. Needs a store the bench built (its tables and indexes). */
export async function explainHotQueries(
  store: OpenedStore,
  at: { ref: string; deepId: number; now: number; firstSeq: number },
): Promise<string> {
  const out: string[] = [];
  for (const query of hotQueries(store, at)) {
    let lines: string[];
    try {
      if (store.backend === 'sqlite') {
        const rows = await store.db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${query.sql}`, query.params);
        lines = rows.map((r) => r.detail);
      } else {
        // EXPLAIN of a DELETE only plans it: nothing is deleted.
        const rows = await store.db.all<{ 'QUERY PLAN': string }>(`EXPLAIN ${query.sql}`, query.params);
        lines = rows.map((r) => r['QUERY PLAN']);
      }
    } catch (error) {
      lines = [`(not planned: ${(error as Error).message})`];
    }
    out.push(`- ${query.name}\n${lines.map((l) => `    ${l}`).join('\n')}`);
  }
  return out.join('\n');
}
