import type { OrderRows } from './order-rows.js';
import {
  estimatePace,
  type PaceEstimate,
  type PaceSettings,
  type PaceState,
  paceBucket,
  quantileOf,
} from './rules/pace-math.js';
import type { PaceInput } from './rules/poll-rules.js';
import type { SqlExecutor } from './sql/executor.js';

export {
  bucketMs,
  GROWTH,
  PACE_STATES,
  type PaceEstimate,
  type PaceState,
  paceBucket,
} from './rules/pace-math.js';

/**
 * The upstream's pace, learned from the events that arrive (docs/reconciler.md, "When the first
 * poll comes"): per product, how long an order takes from its creation to each state, and how
 * long a webhook takes from its event to us. The reconciler's first poll of an order comes when
 * its final webhook is overdue: at a high quantile of the first, plus the usual second.
 *
 * Each distribution is a histogram on logarithmic buckets (the idea of DDSketch: every bucket is
 * {@link GROWTH} times wider than the one before, so any quantile reads back within about 5 % of
 * the true value, from milliseconds to days, in at most a few hundred rows). It lives in SQLite
 * (`order_pace`, migration 6) because every process that writes orders adds to it and reads it:
 * a sample is one UPSERT in the writer's own transaction, a quantile one indexed query. Old
 * samples fade: once a distribution holds more than {@link PACE_MEMORY} samples every weight is
 * halved, so the estimate follows an upstream whose pace changes.
 */

/** The pseudo-state of a webhook's delivery delay (its event's time to its arrival), for every product. */
const DELIVERY = 'DELIVERY';
/** The product key of the delivery delay, which does not depend on the product. */
const ANY_PRODUCT = '*';
/** Beyond this many samples (by weight) in one distribution, every weight is halved. */
export const PACE_MEMORY = 1000;
/** How long a process keeps an estimate before reading it again. */
const ESTIMATE_TTL_MS = 5000;

const FINAL_OF = `SELECT bucket, SUM(weight) AS weight FROM order_pace
  WHERE product_code = @product AND state IN ('SUCCESS', 'FAILED') GROUP BY bucket ORDER BY bucket`;
const FINAL_OF_ALL = `SELECT bucket, SUM(weight) AS weight FROM order_pace
  WHERE product_code <> '${ANY_PRODUCT}' AND state IN ('SUCCESS', 'FAILED') GROUP BY bucket ORDER BY bucket`;
const DELIVERY_SQL = `SELECT bucket, weight FROM order_pace WHERE product_code = '${ANY_PRODUCT}' AND state = '${DELIVERY}'
  ORDER BY bucket`;

type Buckets = Array<{ bucket: number; weight: number }>;

/** The learned pace: {@link recordStateReached} in the writer's transactions, {@link estimate} for the schedule. */
export class OrderPace {
  readonly settings: Readonly<PaceSettings> | null;
  readonly #rows: OrderRows;
  readonly #cache = new Map<string, { at: number; estimate: PaceEstimate | null }>();

  /** `settings` null: samples are still recorded, but {@link estimate} always answers null. */
  constructor(rows: OrderRows, settings: PaceSettings | null) {
    if (settings) {
      if (!(settings.quantile > 0 && settings.quantile < 1)) {
        throw new RangeError(`the pace quantile must be between 0 and 1, got ${settings.quantile}`);
      }
      if (!(settings.minSamples >= 1)) {
        throw new RangeError(`the pace needs at least 1 sample, got ${settings.minSamples}`);
      }
    }
    this.settings = settings ? { ...settings } : null;
    this.#rows = rows;
  }

  /**
   * Adds one sample: an order of `productCode` reached `state` `ms` after its creation. Call it
   * inside the write transaction `tx` that applied the change, once per order and state. Ignores
   * a product-less order and a negative or non-finite duration (clocks disagree).
   */
  async recordStateReached(
    tx: SqlExecutor,
    productCode: string | null,
    state: PaceState,
    ms: number,
  ): Promise<void> {
    if (productCode === null || productCode === ANY_PRODUCT) return;
    await this.#record(tx, productCode, state, ms);
  }

  /** Adds one sample of a webhook's delivery delay: from its event's time to its arrival, in ms. */
  async recordDelivery(tx: SqlExecutor, ms: number): Promise<void> {
    await this.#record(tx, ANY_PRODUCT, DELIVERY, Math.max(0, ms));
  }

  /**
   * The pace of `productCode`'s orders: its own distribution once it holds `minSamples`, else
   * every product's together, else null (not enough known: the schedule's fixed delay applies).
   * Read from the store at most every 5 s per product by this process; `ex` is what it reads on
   * (a write transaction's `tx` inside one; default: the store's last commit).
   */
  async estimate(productCode: string | null, ex: SqlExecutor = this.#rows.db): Promise<PaceEstimate | null> {
    const cached = this.cached(productCode);
    if (cached !== undefined) return cached;
    const estimate = await this.#read(ex, productCode);
    this.#cache.set(productCode ?? ANY_PRODUCT, { at: this.#rows.now(), estimate });
    return estimate;
  }

  /**
   * The estimate {@link estimate} would answer without reading the store, or undefined when it
   * must read (nothing cached for the product, or older than 5 s).
   */
  cached(productCode: string | null): PaceEstimate | null | undefined {
    if (!this.settings) return null;
    const cached = this.#cache.get(productCode ?? ANY_PRODUCT);
    // "Not enough samples yet" is kept too, for the same 5 s or until this process records a sample: before, every
    // write read the histograms again until the 50th sample arrived.
    if (cached && this.#rows.now() - cached.at < ESTIMATE_TTL_MS) return cached.estimate;
    return undefined;
  }

  /**
   * Runs a pure `plan` that may ask for the pace of products (rules/, `PaceInput`), reading the
   * estimates it asks for exactly as the synchronous store did: only when the plan computes a
   * first poll, from the cache while fresh. The plan runs once with what the cache holds; when it
   * asked for an estimate the cache lacks, that estimate is read on `ex` and the plan runs again
   * with it (the rules are pure, so the first run left nothing behind).
   */
  async planWith<P>(ex: SqlExecutor, plan: (pace: PaceInput) => P): Promise<P> {
    if (!this.settings) return plan(null);
    const missing = new Set<string | null>();
    const first = plan((productCode) => {
      const cached = this.cached(productCode);
      if (cached !== undefined) return cached;
      missing.add(productCode);
      return null;
    });
    if (missing.size === 0) return first;
    const read = new Map<string | null, PaceEstimate | null>();
    for (const productCode of missing) read.set(productCode, await this.estimate(productCode, ex));
    return plan((productCode) =>
      read.has(productCode) ? read.get(productCode)! : (this.cached(productCode) ?? null),
    );
  }

  async #read(ex: SqlExecutor, productCode: string | null): Promise<PaceEstimate | null> {
    const delivery = await ex.all<Buckets[number]>(DELIVERY_SQL);
    const own =
      productCode === null ? null : await ex.all<Buckets[number]>(FINAL_OF, { product: productCode });
    // estimatePace uses every product's histogram only when the product's own has too few
    // samples: read it then, and only then.
    const settings = this.settings!;
    const ownEnough = own !== null && quantileOf(own, settings.quantile, settings.minSamples) !== null;
    const all = ownEnough ? [] : await ex.all<Buckets[number]>(FINAL_OF_ALL);
    return estimatePace(settings, { delivery, own, all });
  }

  async #record(tx: SqlExecutor, product: string, state: string, ms: number): Promise<void> {
    if (!Number.isFinite(ms) || ms < 0) return;
    const key = { product, state };
    await tx.run(
      `INSERT INTO order_pace (product_code, state, bucket, weight) VALUES (@product, @state, @bucket, 1)
       ON CONFLICT (product_code, state, bucket) DO UPDATE SET weight = order_pace.weight + 1`,
      { ...key, bucket: paceBucket(ms) },
    );
    for (const [cachedKey, cached] of this.#cache)
      if (cached.estimate === null) this.#cache.delete(cachedKey);
    const total = await tx.get<{ total: number | null }>(
      'SELECT SUM(weight) AS total FROM order_pace WHERE product_code = @product AND state = @state',
      key,
    );
    if ((total?.total ?? 0) > PACE_MEMORY) {
      await tx.run(
        'UPDATE order_pace SET weight = weight / 2 WHERE product_code = @product AND state = @state',
        key,
      );
      await tx.run(
        'DELETE FROM order_pace WHERE product_code = @product AND state = @state AND weight < 0.01',
        key,
      );
    }
  }
}
