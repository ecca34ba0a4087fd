import type { Statement } from 'better-sqlite3';
import type { OrderRows } from './order-rows.js';
import {
  estimatePace,
  type PaceEstimate,
  type PaceSettings,
  type PaceState,
  paceBucket,
} from './rules/pace-math.js';

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

/** The learned pace: {@link record} in the writer's transactions, {@link estimate} for the schedule. */
export class OrderPace {
  readonly settings: Readonly<PaceSettings> | null;
  readonly #rows: OrderRows;
  readonly #add: Statement<{ product: string; state: string; bucket: number }>;
  readonly #total: Statement<{ product: string; state: string }, { total: number | null }>;
  readonly #halve: Statement<{ product: string; state: string }>;
  readonly #forget: Statement<{ product: string; state: string }>;
  readonly #finalOf: Statement<[string], { bucket: number; weight: number }>;
  readonly #finalOfAll: Statement<[], { bucket: number; weight: number }>;
  readonly #delivery: Statement<[], { bucket: number; weight: number }>;
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
    const { db } = rows;
    this.#add = db.prepare(
      `INSERT INTO order_pace (product_code, state, bucket, weight) VALUES (@product, @state, @bucket, 1)
       ON CONFLICT (product_code, state, bucket) DO UPDATE SET weight = weight + 1`,
    );
    this.#total = db.prepare(
      'SELECT SUM(weight) AS total FROM order_pace WHERE product_code = @product AND state = @state',
    );
    this.#halve = db.prepare(
      'UPDATE order_pace SET weight = weight / 2 WHERE product_code = @product AND state = @state',
    );
    this.#forget = db.prepare(
      'DELETE FROM order_pace WHERE product_code = @product AND state = @state AND weight < 0.01',
    );
    this.#finalOf = db.prepare(
      `SELECT bucket, SUM(weight) AS weight FROM order_pace
       WHERE product_code = ? AND state IN ('SUCCESS', 'FAILED') GROUP BY bucket ORDER BY bucket`,
    );
    this.#finalOfAll = db.prepare(
      `SELECT bucket, SUM(weight) AS weight FROM order_pace
       WHERE product_code <> '${ANY_PRODUCT}' AND state IN ('SUCCESS', 'FAILED') GROUP BY bucket ORDER BY bucket`,
    );
    this.#delivery = db.prepare(
      `SELECT bucket, weight FROM order_pace WHERE product_code = '${ANY_PRODUCT}' AND state = '${DELIVERY}'
       ORDER BY bucket`,
    );
  }

  /**
   * Adds one sample: an order of `productCode` reached `state` `ms` after its creation. Call it
   * inside the write transaction that applied the change, once per order and state. Ignores a
   * product-less order and a negative or non-finite duration (clocks disagree).
   */
  recordStateReached(productCode: string | null, state: PaceState, ms: number): void {
    if (productCode === null || productCode === ANY_PRODUCT) return;
    this.#record(productCode, state, ms);
  }

  /** Adds one sample of a webhook's delivery delay: from its event's time to its arrival, in ms. */
  recordDelivery(ms: number): void {
    this.#record(ANY_PRODUCT, DELIVERY, Math.max(0, ms));
  }

  /**
   * The pace of `productCode`'s orders: its own distribution once it holds `minSamples`, else
   * every product's together, else null (not enough known: the schedule's fixed delay applies).
   * Read from the store at most every 5 s per product by this process.
   */
  estimate(productCode: string | null): PaceEstimate | null {
    if (!this.settings) return null;
    const key = productCode ?? ANY_PRODUCT;
    const now = this.#rows.now();
    const cached = this.#cache.get(key);
    // "Not enough samples yet" is kept too, for the same 5 s or until this process records a sample: before, every
    // write read the histograms again until the 50th sample arrived.
    if (cached && now - cached.at < ESTIMATE_TTL_MS) return cached.estimate;
    const estimate = this.#read(productCode);
    this.#cache.set(key, { at: now, estimate });
    return estimate;
  }

  #read(productCode: string | null): PaceEstimate | null {
    return estimatePace(this.settings!, {
      delivery: this.#delivery.all(),
      own: productCode === null ? null : this.#finalOf.all(productCode),
      all: () => this.#finalOfAll.all(),
    });
  }

  #record(product: string, state: string, ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) return;
    const key = { product, state };
    this.#add.run({ ...key, bucket: paceBucket(ms) });
    for (const [cachedKey, cached] of this.#cache)
      if (cached.estimate === null) this.#cache.delete(cachedKey);
    if ((this.#total.get(key)?.total ?? 0) > PACE_MEMORY) {
      this.#halve.run(key);
      this.#forget.run(key);
    }
  }
}
