import { FIXED_FIRST_POLL, type FirstPollLookup, type FirstPollPlan } from '../domain/poll-rules.js';
import type { SqlExecutor } from './sql/executor.js';
import type { StoreContext } from './store-context.js';

/**
 * Each product's first-poll plan (`poll_plans`, migration 19; the rule is poll-rules.ts,
 * `firstPollAt`): written by the reconciler alone, from the pace it learns of the orders'
 * recorded times (reconciler/learn-pace.ts), and read by every order writer to set the first poll
 * of a new or moved order. A row per product with a pace of its own, and {@link EVERY_PRODUCT}
 * for every other; until a reconciler has written any, every product takes `FIXED_FIRST_POLL`.
 * A writer reads the table at most every 5 s ({@link lookup}): it holds a row per product.
 */
export class PollPlans {
  readonly #context: StoreContext;
  #cache: { at: number; plans: ReadonlyMap<string, FirstPollPlan> } | null = null;

  constructor(context: StoreContext) {
    this.#context = context;
  }

  /**
   * Every product's plan as of at most 5 s ago, read on `ex` (a write transaction's `tx` inside
   * one; default: the store's last commit) when older: the product's own row, else the row for
   * every product, else `FIXED_FIRST_POLL`.
   */
  async lookup(ex: SqlExecutor = this.#context.db): Promise<FirstPollLookup> {
    const now = this.#context.now();
    if (this.#cache === null || now - this.#cache.at >= PLANS_TTL_MS) {
      this.#cache = { at: now, plans: await readPlans(ex) };
    }
    const { plans } = this.#cache;
    const fallback = plans.get(EVERY_PRODUCT) ?? FIXED_FIRST_POLL;
    return (productCode) => (productCode === null ? fallback : (plans.get(productCode) ?? fallback));
  }

  /** Every plan as stored, by product ({@link EVERY_PRODUCT} for every other product): for `status`. */
  all(): Promise<Map<string, FirstPollPlan>> {
    return readPlans(this.#context.db);
  }

  /** Replaces every plan with `plans` (the reconciler's, after it learned), in one transaction. */
  async replace(plans: ReadonlyMap<string, FirstPollPlan>): Promise<void> {
    await this.#context.db.write(async (tx) => {
      const now = this.#context.now();
      await tx.run('DELETE FROM poll_plans');
      for (const [product, plan] of plans) await tx.run(INSERT_PLAN, toRow(product, plan, now));
    });
    this.#cache = null;
  }

  /**
   * The recorded facts the pace is learned from, newest first: the last `limit` events that say
   * something of it (a webhook, for its delivery delay; a move to SUCCESS or FAILED, for the time
   * to a final state), each with its order's product and upstream times. Polls that changed
   * nothing and the audit's reads are left out, so they cannot crowd the window. Reads only.
   */
  recentEvents(limit: number): Promise<PaceFact[]> {
    return this.#context.db.all<PaceFact>(
      `SELECT e.partner_ref, e.source, e.status, e.reason, e.received_at, e.occurred_at,
              o.product_code, o.created_at, o.success_at
       FROM order_events e JOIN orders o ON o.partner_ref = e.partner_ref
       WHERE e.reason <> 'partner_ref_reused'
         AND (e.source = 'webhook' OR (e.reason IN ('initial', 'transition') AND e.status IN ('SUCCESS', 'FAILED')))
       ORDER BY e.id DESC LIMIT @limit`,
      { limit },
    );
  }
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
    (product_code, final_ms, delivery_ms, min_ms, max_ms, outlier_ms, samples, planned_at)
  VALUES (@product_code, @final_ms, @delivery_ms, @min_ms, @max_ms, @outlier_ms, @samples, @planned_at)
  ON CONFLICT (product_code) DO UPDATE SET final_ms = excluded.final_ms, delivery_ms = excluded.delivery_ms,
    min_ms = excluded.min_ms, max_ms = excluded.max_ms, outlier_ms = excluded.outlier_ms,
    samples = excluded.samples, planned_at = excluded.planned_at`;

/** Every plan as stored, by product, in product order. */
async function readPlans(ex: SqlExecutor): Promise<Map<string, FirstPollPlan>> {
  const rows = await ex.all<PlanRow>('SELECT * FROM poll_plans ORDER BY product_code');
  return new Map(rows.map((row) => [row.product_code, fromRow(row)]));
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

function toRow(product: string, plan: FirstPollPlan, now: number): PlanRow {
  return {
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
