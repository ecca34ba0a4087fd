import { FIXED_FIRST_POLL, type FirstPollLookup, type FirstPollPlan } from '../domain/poll-rules.js';
import type { Order } from '../upstream/model.js';
import type { SqlExecutor } from './sql/executor.js';
import type { StoreContext } from './store-context.js';

/**
 * Each upstream's first-poll plan of each product (`poll_plans`, migration 19, keyed by upstream
 * since 26; the rule is poll-rules.ts, `firstPollAt`): written by each upstream's reconciler
 * alone, from the pace it learns of that upstream's recorded events (reconciler/learn-pace.ts),
 * and read by every order writer to set the first poll of a new or moved order from its
 * upstream's plans. Per upstream, a row per product with a pace of its own, and
 * {@link EVERY_PRODUCT} for every other; an upstream whose reconciler has written none takes
 * `FIXED_FIRST_POLL`, never another upstream's plan (docs/reconciler.md, "Several upstreams").
 * A writer reads the table at most every 5 s ({@link lookup}): it holds a row per upstream and product.
 */
export class PollPlans {
  readonly #context: StoreContext;
  #cache: { at: number; plans: ReadonlyMap<string, ReadonlyMap<string, FirstPollPlan>> } | null = null;

  constructor(context: StoreContext) {
    this.#context = context;
  }

  /**
   * Every upstream's plans as of at most 5 s ago, read on `ex` (a write transaction's `tx` inside
   * one; default: the store's last commit) when older. An order's plan is its upstream's row of
   * its product, else its upstream's row for every product, else `FIXED_FIRST_POLL`.
   */
  async lookup(ex: SqlExecutor = this.#context.db): Promise<FirstPollLookup> {
    const now = this.#context.now();
    if (this.#cache === null || now - this.#cache.at >= PLANS_TTL_MS) {
      this.#cache = { at: now, plans: byUpstream(await readPlans(ex)) };
    }
    const { plans } = this.#cache;
    return ({ upstream, product_code: product }) => {
      const own = plans.get(upstream);
      if (own === undefined) return FIXED_FIRST_POLL;
      const fallback = own.get(EVERY_PRODUCT) ?? FIXED_FIRST_POLL;
      return product === null ? fallback : (own.get(product) ?? fallback);
    };
  }

  /** One upstream's plans as stored, by product ({@link EVERY_PRODUCT} for every other product): for `status`. */
  async ofUpstream(upstream: string): Promise<Map<string, FirstPollPlan>> {
    return byUpstream(await readPlans(this.#context.db, upstream)).get(upstream) ?? new Map();
  }

  /**
   * Replaces `upstream`'s plans with `plans` (its reconciler's, after it learned), in one
   * transaction; every other upstream's stay as they are.
   */
  async replace(upstream: string, plans: ReadonlyMap<string, FirstPollPlan>): Promise<void> {
    await this.#context.db.write(async (tx) => {
      const now = this.#context.now();
      await tx.run('DELETE FROM poll_plans WHERE upstream = @upstream', { upstream });
      for (const [product, plan] of plans) await tx.run(INSERT_PLAN, toRow(upstream, product, plan, now));
    });
    this.#cache = null;
  }

  /**
   * The recorded facts `upstream`'s pace is learned from, newest first: the last `limit` events
   * it said (`order_events.upstream`) that say something of it (a webhook, for its delivery delay;
   * a move to SUCCESS or FAILED, for the time to a final state), each with its order's product
   * and upstream times. Polls that changed nothing and the audit's reads are left out, so they
   * cannot crowd the window. An event of an ended attempt (an order that failed over: its row is
   * now another attempt's, under another partner_ref) takes them from the order object it
   * recorded, so an attempt that ended FAILED teaches its own upstream. Reads only.
   */
  async recentEvents(upstream: string, limit: number): Promise<PaceFact[]> {
    const rows = await this.#context.db.all<PaceFact & { payload: string | null }>(
      `SELECT e.partner_ref, e.source, e.status, e.reason, e.received_at, e.occurred_at,
              o.product_code, o.created_at, o.success_at,
              CASE WHEN o.id IS NULL THEN e.payload END AS payload
       FROM order_events e LEFT JOIN orders o ON o.partner_ref = e.partner_ref
       WHERE e.upstream = @upstream AND e.reason <> 'partner_ref_reused'
         AND (e.source = 'webhook' OR (e.reason IN ('initial', 'transition') AND e.status IN ('SUCCESS', 'FAILED')))
       ORDER BY e.id DESC LIMIT @limit`,
      { upstream, limit },
    );
    return rows.map(({ payload, ...fact }) =>
      payload === null ? fact : { ...fact, ...recordedOrder(payload) },
    );
  }
}

/**
 * What an ended attempt's event recorded of its order (the snapshot, or a webhook's envelope
 * around it): its product and upstream times; nulls when the payload has none.
 */
function recordedOrder(payload: string): Pick<PaceFact, 'product_code' | 'created_at' | 'success_at'> {
  let order: Partial<Record<keyof Order, unknown>> = {};
  try {
    const parsed = JSON.parse(payload) as { data?: unknown } | null;
    const inner = parsed !== null && typeof parsed === 'object' && 'data' in parsed ? parsed.data : parsed;
    if (inner !== null && typeof inner === 'object') order = inner as typeof order;
  } catch {
    // Not JSON: nothing to learn from.
  }
  const text = (value: unknown) => (typeof value === 'string' ? value : null);
  return {
    product_code: text(order.product_code),
    created_at: text(order.created_at),
    success_at: text(order.success_at),
  };
}

/** The product key of the plan for every product without its own. */
export const EVERY_PRODUCT = '*';

/** How long a writer keeps the plans it read. */
const PLANS_TTL_MS = 5000;

/** An order event with what the pace needs of its order ({@link PollPlans.recentEvents}). */
export interface PaceFact {
  partner_ref: string;
  source: string;
  status: string | null;
  reason: string;
  received_at: number;
  occurred_at: number | null;
  product_code: string | null;
  created_at: string | null;
  success_at: string | null;
}

interface PlanRow {
  upstream: string;
  product_code: string;
  final_ms: number;
  delivery_ms: number;
  min_ms: number;
  /** Null: no upper bound. */
  max_ms: number | null;
  outlier_ms: number | null;
  samples: number;
  planned_at: number;
}

/**
 * An UPSERT: the reconciler replaces the plans under its pass lock, but a lock that ran out (a
 * frozen process) may let two replace them at once, and the second must not fail on the first's rows.
 */
const INSERT_PLAN = `INSERT INTO poll_plans
    (upstream, product_code, final_ms, delivery_ms, min_ms, max_ms, outlier_ms, samples, planned_at)
  VALUES (@upstream, @product_code, @final_ms, @delivery_ms, @min_ms, @max_ms, @outlier_ms, @samples, @planned_at)
  ON CONFLICT (upstream, product_code) DO UPDATE SET final_ms = excluded.final_ms, delivery_ms = excluded.delivery_ms,
    min_ms = excluded.min_ms, max_ms = excluded.max_ms, outlier_ms = excluded.outlier_ms,
    samples = excluded.samples, planned_at = excluded.planned_at`;

/** Every plan as stored (of `upstream` only, when given), in upstream and product order. */
function readPlans(ex: SqlExecutor, upstream?: string): Promise<PlanRow[]> {
  return upstream === undefined
    ? ex.all<PlanRow>('SELECT * FROM poll_plans ORDER BY upstream, product_code')
    : ex.all<PlanRow>('SELECT * FROM poll_plans WHERE upstream = @upstream ORDER BY product_code', {
        upstream,
      });
}

/** The plans by upstream, then by product. */
function byUpstream(rows: readonly PlanRow[]): Map<string, Map<string, FirstPollPlan>> {
  const plans = new Map<string, Map<string, FirstPollPlan>>();
  for (const row of rows) {
    const own = plans.get(row.upstream) ?? new Map<string, FirstPollPlan>();
    plans.set(row.upstream, own);
    own.set(row.product_code, fromRow(row));
  }
  return plans;
}

function fromRow(row: PlanRow): FirstPollPlan {
  return {
    finalMs: row.final_ms,
    deliveryMs: row.delivery_ms,
    minMs: row.min_ms,
    maxMs: row.max_ms ?? Number.POSITIVE_INFINITY,
    outlierMs: row.outlier_ms,
    samples: row.samples,
  };
}

function toRow(upstream: string, product: string, plan: FirstPollPlan, now: number): PlanRow {
  return {
    upstream,
    product_code: product,
    final_ms: plan.finalMs,
    delivery_ms: plan.deliveryMs,
    min_ms: plan.minMs,
    max_ms: Number.isFinite(plan.maxMs) ? plan.maxMs : null,
    outlier_ms: plan.outlierMs,
    samples: plan.samples,
    planned_at: now,
  };
}
