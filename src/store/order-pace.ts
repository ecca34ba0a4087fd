import type { PaceSample } from '../domain/apply-plan.js';
import {
  estimatePace,
  type PaceEstimate,
  type PaceSettings,
  type PaceState,
  paceBucket,
  quantileOf,
} from '../domain/pace-math.js';
import type { PaceInput } from '../domain/poll-rules.js';
import type { SqlExecutor } from './sql/executor.js';
import { together } from './sql/together.js';
import type { StoreContext } from './store-context.js';

export {
  bucketMs,
  GROWTH,
  PACE_STATES,
  type PaceEstimate,
  type PaceState,
  paceBucket,
} from '../domain/pace-math.js';

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
 * a sample is an UPSERT of its bucket and an update of its distribution's running total
 * (`order_pace_totals`, migration 15) in the writer's own transaction, a quantile one indexed
 * query. Old samples fade: once a distribution holds more than {@link PACE_MEMORY} samples (by
 * its running total) every weight is halved, so the estimate follows an upstream whose pace
 * changes.
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

/**
 * A write's samples' statements, issued ({@link OrderPace} `#add`): the UPSERT of their buckets,
 * and per sample the update of its distribution's running total, which answers the new total.
 */
interface Added {
  added: Promise<unknown>;
  totals: Array<{ key: { product: string; state: string }; total: Promise<{ total: number } | undefined> }>;
}

/** The UPSERT of `n` samples' buckets (of distinct distributions), one row each: @product0, @state0, @bucket0 … */
function bucketsUpsert(n: number): string {
  const rows = Array.from({ length: n }, (_, i) => `(@product${i}, @state${i}, @bucket${i}, 1)`);
  return `INSERT INTO order_pace (product_code, state, bucket, weight) VALUES ${rows.join(', ')}
    ON CONFLICT (product_code, state, bucket) DO UPDATE SET weight = order_pace.weight + 1`;
}

/** The UPSERTs of 1 and 2 samples (a write has at most a delivery and a state), built once. */
const BUCKET_UPSERTS = [bucketsUpsert(1), bucketsUpsert(2)];

/**
 * `n` samples' addition to their distribution's running total, answering the new total; no row
 * when the distribution has none yet (its first sample): then {@link FIRST_TOTAL}. (An UPDATE,
 * not an UPSERT: SQLite's `INSERT … ON CONFLICT … RETURNING` took several times as long.)
 */
const ADD_TO_TOTAL = `UPDATE order_pace_totals SET total = total + @n
  WHERE product_code = @product AND state = @state RETURNING total`;
const FIRST_TOTAL = `INSERT INTO order_pace_totals (product_code, state, total) VALUES (@product, @state, @n)
  ON CONFLICT (product_code, state) DO UPDATE SET total = order_pace_totals.total + excluded.total
  RETURNING total`;
/** `count` samples into one bucket (a group commit's, {@link PaceBatch}). */
const ADD_TO_BUCKET = `INSERT INTO order_pace (product_code, state, bucket, weight) VALUES (@product, @state, @bucket, @count)
  ON CONFLICT (product_code, state, bucket) DO UPDATE SET weight = order_pace.weight + excluded.weight`;
const HALVE = 'UPDATE order_pace SET weight = weight / 2 WHERE product_code = @product AND state = @state';
const DROP_FADED =
  'DELETE FROM order_pace WHERE product_code = @product AND state = @state AND weight < 0.01';
/** After halving: the running total set to the sum of what is left, exactly. */
const RESET_TOTAL = `UPDATE order_pace_totals SET total = (
    SELECT COALESCE(SUM(weight), 0) FROM order_pace WHERE product_code = @product AND state = @state)
  WHERE product_code = @product AND state = @state RETURNING total`;

/** A recorded sample: its distribution and duration. */
interface SampleKey {
  product: string;
  state: string;
  ms: number;
}

/** The learned pace: {@link recordStateReached} in the writer's transactions, {@link estimate} for the schedule. */
export class OrderPace {
  readonly settings: Readonly<PaceSettings> | null;
  readonly #context: StoreContext;
  readonly #cache = new Map<string, { at: number; estimate: PaceEstimate | null }>();

  /** `settings` null: samples are still recorded, but {@link estimate} always answers null. */
  constructor(context: StoreContext, settings: PaceSettings | null) {
    if (settings) {
      if (!(settings.quantile > 0 && settings.quantile < 1)) {
        throw new RangeError(`the pace quantile must be between 0 and 1, got ${settings.quantile}`);
      }
      if (!(settings.minSamples >= 1)) {
        throw new RangeError(`the pace needs at least 1 sample, got ${settings.minSamples}`);
      }
    }
    this.settings = settings ? { ...settings } : null;
    this.#context = context;
  }

  /**
   * Adds one sample: an order of `productCode` reached `state` `ms` after its creation. Call it
   * inside the write transaction `tx` that applied the change, once per order and state. Ignores
   * a product-less order and a negative or non-finite duration (clocks disagree).
   */
  recordStateReached(
    tx: SqlExecutor,
    productCode: string | null,
    state: PaceState,
    ms: number,
  ): Promise<void> {
    return this.recordSamples(tx, [{ kind: 'state', productCode, state, ms }]);
  }

  /** Adds one sample of a webhook's delivery delay: from its event's time to its arrival, in ms. */
  recordDelivery(tx: SqlExecutor, ms: number): Promise<void> {
    return this.recordSamples(tx, [{ kind: 'delivery', ms }]);
  }

  /**
   * Adds a write's samples (rules/apply-plan.ts, `pace`), as {@link recordStateReached} and
   * {@link recordDelivery} each would, in the write's transaction `tx`. One UPSERT of every
   * sample's bucket and, per sample, the update of its distribution's running total
   * (`order_pace_totals`, migration 15: what `SUM(weight)` of the distribution's buckets would
   * answer, without reading them) are issued at the call (sql/together.ts: one round trip on
   * PostgreSQL, with whatever the writer issues beside them); a distribution then past
   * {@link PACE_MEMORY} is halved after them, and its total set to the sum left. The samples of one write are of distinct
   * distributions (one delivery, one state at most), so halving after the others' UPSERTs leaves
   * what halving between them would; were two of one distribution, they would be added one
   * after the other, as before.
   */
  recordSamples(tx: SqlExecutor, samples: readonly PaceSample[]): Promise<void> {
    const keys: Array<{ product: string; state: string; ms: number }> = [];
    for (const sample of samples) {
      const key = this.keyOf(sample);
      if (key) keys.push(key);
    }
    if (keys.length === 0) return Promise.resolve();
    const distinct = new Set(keys.map(({ product, state }) => JSON.stringify([product, state]))).size;
    if (distinct < keys.length || keys.length > BUCKET_UPSERTS.length) {
      return keys.reduce<Promise<void>>(
        (previous, key) => previous.then(() => this.#halveOver(tx, this.#add(tx, [key]))),
        Promise.resolve(),
      );
    }
    return this.#halveOver(tx, this.#add(tx, keys));
  }

  /**
   * The pace of `productCode`'s orders: its own distribution once it holds `minSamples`, else
   * every product's together, else null (not enough known: the schedule's fixed delay applies).
   * Read from the store at most every 5 s per product by this process; `ex` is what it reads on
   * (a write transaction's `tx` inside one; default: the store's last commit).
   */
  async estimate(
    productCode: string | null,
    ex: SqlExecutor = this.#context.db,
  ): Promise<PaceEstimate | null> {
    const cached = this.cached(productCode);
    if (cached !== undefined) return cached;
    const estimate = await this.#read(ex, productCode);
    this.#cache.set(productCode ?? ANY_PRODUCT, { at: this.#context.now(), estimate });
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
    if (cached && this.#context.now() - cached.at < ESTIMATE_TTL_MS) return cached.estimate;
    return undefined;
  }

  /**
   * Runs a pure `plan` that may ask for the pace of products (rules/, `PaceInput`), reading the
   * estimates it asks for exactly as the synchronous store did: only when the plan computes a
   * first poll, from the cache while fresh. The plan runs once with what the cache holds; when it
   * asked for an estimate the cache lacks, that estimate is read on `ex` and the plan runs again
   * with it (the rules are pure, so the first run left nothing behind).
   */
  async planWith<P>(ex: SqlExecutor, plan: (pace: PaceInput) => P, batch?: PaceBatch): Promise<P> {
    if (!this.settings) return plan(null);
    const missing = new Set<string | null>();
    const first = plan((productCode) => {
      const cached = this.cached(productCode);
      if (cached !== undefined) return cached;
      missing.add(productCode);
      return null;
    });
    if (missing.size === 0) return first;
    // A group commit's samples not yet written are written first: the read sees them, as it
    // would had each been written by its own apply.
    await batch?.flush(ex);
    const read = new Map<string | null, PaceEstimate | null>();
    for (const productCode of missing) read.set(productCode, await this.estimate(productCode, ex));
    return plan((productCode) =>
      read.has(productCode) ? read.get(productCode)! : (this.cached(productCode) ?? null),
    );
  }

  async #read(ex: SqlExecutor, productCode: string | null): Promise<PaceEstimate | null> {
    // Both issued together (sql/together.ts): one round trip on PostgreSQL.
    const [delivery, own] = await together([
      ex.all<Buckets[number]>(DELIVERY_SQL),
      productCode === null
        ? Promise.resolve(null)
        : ex.all<Buckets[number]>(FINAL_OF, { product: productCode }),
    ]);
    // estimatePace uses every product's histogram only when the product's own has too few
    // samples: read it then, and only then.
    const settings = this.settings!;
    const ownEnough = own !== null && quantileOf(own, settings.quantile, settings.minSamples) !== null;
    const all = ownEnough ? [] : await ex.all<Buckets[number]>(FINAL_OF_ALL);
    return estimatePace(settings, { delivery, own, all });
  }

  /** The distribution and the duration of a sample, or null for one that is not recorded. */
  keyOf(sample: PaceSample): { product: string; state: string; ms: number } | null {
    const key =
      sample.kind === 'delivery'
        ? { product: ANY_PRODUCT, state: DELIVERY, ms: Math.max(0, sample.ms) }
        : sample.productCode === null || sample.productCode === ANY_PRODUCT
          ? null
          : { product: sample.productCode, state: sample.state, ms: sample.ms };
    if (key === null || !Number.isFinite(key.ms) || key.ms < 0) return null;
    return key;
  }

  /** Forgets the cached "not enough samples yet" answers: this process recorded a sample. */
  forgetNotEnough(): void {
    for (const [cachedKey, cached] of this.#cache)
      if (cached.estimate === null) this.#cache.delete(cachedKey);
  }

  /** Issues the statements of samples of distinct distributions (at most two), all at the call. */
  #add(tx: SqlExecutor, keys: ReadonlyArray<{ product: string; state: string; ms: number }>): Added {
    const params: Record<string, string | number> = {};
    keys.forEach(({ product, state, ms }, i) => {
      params[`product${i}`] = product;
      params[`state${i}`] = state;
      params[`bucket${i}`] = paceBucket(ms);
    });
    const added = tx.run(BUCKET_UPSERTS[keys.length - 1]!, params);
    this.forgetNotEnough();
    const totals = keys.map(({ product, state }) => {
      const key = { product, state };
      return { key, total: tx.get<{ total: number }>(ADD_TO_TOTAL, { ...key, n: 1 }) };
    });
    return { added, totals };
  }

  /**
   * Awaits the statements {@link #add} issued (and writes the first total of a new
   * distribution), then halves every distribution past {@link PACE_MEMORY}.
   */
  #halveOver(tx: SqlExecutor, { added, totals }: Added): Promise<void> {
    return together([added, ...totals.map(({ total }) => total)]).then(async ([, ...rows]) => {
      for (let i = 0; i < totals.length; i++) {
        const { key } = totals[i]!;
        const total = (rows[i] ?? (await tx.get<{ total: number }>(FIRST_TOTAL, { ...key, n: 1 })))!.total;
        if (total > PACE_MEMORY) await halve(tx, key);
      }
    });
  }

  /**
   * Writes samples recorded in order (a group commit's, {@link PaceBatch}) as one by one
   * {@link recordSamples} would leave them, in fewer statements: per distribution, one update of
   * its total by all its samples and one UPSERT per bucket with its count. Only when the total
   * then passes {@link PACE_MEMORY} are its samples replayed in order: those up to the one that
   * passed it added, the distribution halved, the rest added (and halved again should they pass
   * it again), as each sample would have been.
   */
  async writeInOrder(tx: SqlExecutor, keys: readonly SampleKey[]): Promise<void> {
    const byDistribution = new Map<string, { key: { product: string; state: string }; buckets: number[] }>();
    for (const { product, state, ms } of keys) {
      const id = `${product}\u0000${state}`;
      let distribution = byDistribution.get(id);
      if (!distribution) {
        distribution = { key: { product, state }, buckets: [] };
        byDistribution.set(id, distribution);
      }
      distribution.buckets.push(paceBucket(ms));
    }
    const distributions = [...byDistribution.values()];
    const totals = await together(
      distributions.map(({ key, buckets }) =>
        tx.get<{ total: number }>(ADD_TO_TOTAL, { ...key, n: buckets.length }),
      ),
    );
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < distributions.length; i++) {
      const { key, buckets } = distributions[i]!;
      const total = (totals[i] ??
        (await tx.get<{ total: number }>(FIRST_TOTAL, { ...key, n: buckets.length })))!.total;
      if (total <= PACE_MEMORY) {
        writes.push(...addToBuckets(tx, key, buckets));
        continue;
      }
      // Replayed: the total before these samples, then each sample as recordSamples adds it.
      let running = total - buckets.length;
      let from = 0;
      for (let j = 0; j < buckets.length; j++) {
        running += 1;
        if (running <= PACE_MEMORY) continue;
        await together(addToBuckets(tx, key, buckets.slice(from, j + 1)));
        running = await halve(tx, key);
        from = j + 1;
      }
      // The total already counts these; the halving above set it to the sum left, without them.
      const rest = buckets.slice(from);
      writes.push(...addToBuckets(tx, key, rest));
      if (rest.length > 0 && from > 0) writes.push(tx.run(ADD_TO_TOTAL, { ...key, n: rest.length }));
    }
    await together(writes);
  }
}

/** The UPSERTs of `buckets`' samples of one distribution, one per bucket with its count, issued at the call. */
function addToBuckets(
  tx: SqlExecutor,
  key: { product: string; state: string },
  buckets: readonly number[],
): Promise<unknown>[] {
  const counts = new Map<number, number>();
  for (const bucket of buckets) counts.set(bucket, (counts.get(bucket) ?? 0) + 1);
  return [...counts].map(([bucket, count]) => tx.run(ADD_TO_BUCKET, { ...key, bucket, count }));
}

/**
 * Halves a distribution past {@link PACE_MEMORY}: every weight halved, the faded buckets
 * deleted, the running total set to the sum left (answered).
 */
async function halve(tx: SqlExecutor, key: { product: string; state: string }): Promise<number> {
  const [, , reset] = await together([
    tx.run(HALVE, key),
    tx.run(DROP_FADED, key),
    tx.get<{ total: number }>(RESET_TOTAL, key),
  ]);
  return reset!.total;
}

/**
 * The pace samples of a group commit (`OrderWriter.applyBatch`), written once per transaction
 * ({@link flush}, the batch's `beforeCommit`) instead of by each apply: a batch of 50 webhooks of
 * one product then writes two totals and a few buckets, where each apply wrote a bucket and
 * two totals of its own (about a sixth of an apply's time in SQLite). What is written is what
 * the applies one by one would have written ({@link OrderPace.writeInOrder}):
 * - a unit's samples join the batch only when the unit succeeds ({@link add} at its end), in
 *   unit order; a unit that fails adds none;
 * - an apply that reads an estimate first writes the samples gathered so far ({@link flush} on
 *   its `tx`, via `planWith`), so it reads what it would have read; should that unit then fail,
 *   its savepoint takes those writes back and they are gathered again ({@link unitFailed});
 * - a unit that runs again from the start of the batch (PostgreSQL's units after a failed unit
 *   on the fast path run again with savepoints, the first transaction rolled back) drops what
 *   was gathered ({@link startUnit}).
 */
export class PaceBatch {
  readonly #pace: OrderPace;
  #pending: SampleKey[] = [];
  /** What the running unit wrote of the batch's samples before its reads, or null outside a unit. */
  #flushedInUnit: SampleKey[] | null = null;
  #lastUnit = -1;

  constructor(pace: OrderPace) {
    this.#pace = pace;
  }

  /** Unit `index` of the batch starts (in its transaction). */
  startUnit(index: number): void {
    if (index <= this.#lastUnit) this.#pending = [];
    this.#lastUnit = index;
    this.#flushedInUnit = [];
  }

  /** The running unit's samples (rules/apply-plan.ts, `pace`), at its successful end. */
  add(samples: readonly PaceSample[]): void {
    let recorded = false;
    for (const sample of samples) {
      const key = this.#pace.keyOf(sample);
      if (key) {
        this.#pending.push(key);
        recorded = true;
      }
    }
    // As recordSamples does when it records one: "not enough samples yet" may no longer hold.
    if (recorded) this.#pace.forgetNotEnough();
    this.#flushedInUnit = null;
  }

  /** The running unit failed: its savepoint took back what it wrote of the batch's samples. */
  unitFailed(): void {
    if (this.#flushedInUnit) this.#pending = [...this.#flushedInUnit, ...this.#pending];
    this.#flushedInUnit = null;
  }

  /** Writes the samples gathered so far on `tx`. */
  flush(tx: SqlExecutor): Promise<void> {
    if (this.#pending.length === 0) return Promise.resolve();
    const keys = this.#pending;
    this.#pending = [];
    this.#flushedInUnit?.push(...keys);
    return this.#pace.writeInOrder(tx, keys);
  }
}
