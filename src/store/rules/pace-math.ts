/**
 * The arithmetic of the learned pace (order-pace.ts), without storage: which bucket a duration
 * falls in, what a bucket stands for, and a quantile of a histogram. Each backend keeps the
 * histograms in its own table and reads them back through these functions.
 */

/** The states whose time from creation is learned; SUCCESS and FAILED together make "final". */
export const PACE_STATES = ['PROCESSING', 'SUCCESS', 'FAILED'] as const;
export type PaceState = (typeof PACE_STATES)[number];

/** How much wider each bucket is than the one before: quantiles within about ±5 %. */
export const GROWTH = 1.1;

/** What the upstream's pace says about one product's orders. */
export interface PaceEstimate {
  /** The chosen quantile of the time from creation to a final state, in ms. */
  finalMs: number;
  /**
   * The {@link OUTLIER_QUANTILE} of the same distribution, in ms: an order open longer than this
   * took longer than all but one in a thousand of its kind (with few samples, about the longest
   * seen). One open twice as long is an outlier, polled at the backoff's cap (poll-rules.ts).
   */
  outlierMs: number;
  /** The median delivery delay of a webhook, in ms (0 until enough webhooks arrived). */
  deliveryMs: number;
  /** Samples behind `finalMs`, by weight. */
  samples: number;
  /** `product` when the product has enough samples of its own, else `all` (every product together). */
  scope: 'product' | 'all';
}

/** The quantile of the time to final beyond which an open order is an outlier. */
export const OUTLIER_QUANTILE = 0.999;

/** A distribution as stored: weight per bucket, in bucket order. */
export type Histogram = ReadonlyArray<{ bucket: number; weight: number }>;

/** The bucket of a duration: 0 for under 1 ms, then ⌈log_GROWTH(ms)⌉. */
export function paceBucket(ms: number): number {
  return ms < 1 ? 0 : Math.max(0, Math.ceil(Math.log(ms) / Math.log(GROWTH)));
}

/** The duration a bucket stands for: its upper bound, so a quantile errs on the late side. */
export function bucketMs(bucket: number): number {
  return bucket === 0 ? 1 : GROWTH ** bucket;
}

/** The samples of a histogram, by weight. */
export function sumOf(histogram: Histogram): number {
  return histogram.reduce((sum, { weight }) => sum + weight, 0);
}

/** The q-quantile of a histogram in bucket order, in ms, or null when it holds fewer than `minSamples`. */
export function quantileOf(histogram: Histogram, q: number, minSamples: number): number | null {
  const total = sumOf(histogram);
  if (total < minSamples || total === 0) return null;
  let seen = 0;
  for (const { bucket, weight } of histogram) {
    seen += weight;
    if (seen >= q * total) return bucketMs(bucket);
  }
  return bucketMs(histogram[histogram.length - 1]!.bucket);
}

/** The settings of the estimate (config: `RECONCILE_FIRST_POLL_QUANTILE`, `RECONCILE_PACE_MIN_SAMPLES`). */
export interface PaceSettings {
  /** The quantile of the time to a final state the first poll waits for (0 < q < 1). */
  quantile: number;
  /** Samples (by weight) a distribution needs before it is used. */
  minSamples: number;
}

/**
 * The pace of a product's orders from its histograms: its own time to a final state (`own`,
 * SUCCESS and FAILED together; null for a product-less order) once it holds `minSamples`, else
 * every product's together (`all`, or a function that reads it: called only when `own` is not
 * enough), else null; with the median webhook delivery delay (0 until `minSamples` arrived).
 */
export function estimatePace(
  { quantile, minSamples }: PaceSettings,
  histograms: { delivery: Histogram; own: Histogram | null; all: Histogram | (() => Histogram) },
): PaceEstimate | null {
  const delivery = quantileOf(histograms.delivery, 0.5, minSamples) ?? 0;
  const { own } = histograms;
  if (own !== null) {
    const finalMs = quantileOf(own, quantile, minSamples);
    if (finalMs !== null) {
      const outlierMs = quantileOf(own, OUTLIER_QUANTILE, minSamples)!;
      return { finalMs, outlierMs, deliveryMs: delivery, samples: sumOf(own), scope: 'product' };
    }
  }
  const all = typeof histograms.all === 'function' ? histograms.all() : histograms.all;
  const finalMs = quantileOf(all, quantile, minSamples);
  if (finalMs === null) return null;
  const outlierMs = quantileOf(all, OUTLIER_QUANTILE, minSamples)!;
  return { finalMs, outlierMs, deliveryMs: delivery, samples: sumOf(all), scope: 'all' };
}
