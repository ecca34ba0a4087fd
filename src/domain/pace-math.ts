import { normalDensity, normalQuantile } from './normal.js';

/**
 * The arithmetic of the learned pace (reconciler/learn-pace.ts): which bucket a duration falls
 * in, what a bucket stands for, a quantile of a histogram, and the outlier time (a confidence
 * bound of a high quantile). The reconciler fills the histograms from the store's recorded times
 * and reads them through these functions.
 */

/** How much wider each bucket is than the one before: quantiles within about ±5 %. */
export const GROWTH = 1.1;

/** What the upstream's pace says about one product's orders. */
export interface PaceEstimate {
  /** The chosen quantile of the time from creation to a final state, in ms. */
  finalMs: number;
  /**
   * The outlier time, in ms ({@link outlierBoundMs}): with 95 % confidence given the samples, at
   * least all but one in a thousand of the product's orders reach a final state sooner. An order
   * open longer is an outlier, polled at the backoff's cap (poll-rules.ts). Infinite (no
   * outlier) when the samples are too few to bound it (with `RECONCILE_PACE_MIN_SAMPLES` under 6).
   */
  outlierMs: number;
  /** The median delivery delay of a webhook, in ms (0 until enough webhooks arrived). */
  deliveryMs: number;
  /** Samples behind `finalMs`, by weight. */
  samples: number;
  /** `product` when the product has enough samples of its own, else `all` (every product together). */
  scope: 'product' | 'all';
}

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

/** The share of a product's orders the outlier time must cover: all but one in a thousand. */
export const OUTLIER_QUANTILE = 0.999;
/** How sure the outlier time must be to cover {@link OUTLIER_QUANTILE}, given the samples. */
export const OUTLIER_CONFIDENCE = 0.95;
/**
 * The quantile the tail is measured from: far enough out to show its spread, far enough in that
 * the late samples of orders stuck for hours (a percent or so of them) barely move it.
 */
const BODY_QUANTILE = 0.9;

/**
 * The q-quantile of a histogram, in ms, read between the edges of its bucket: within bucket b,
 * (GROWTH^(b−1), GROWTH^b], the samples are taken as spread evenly on the log scale (a quantile
 * read as the upper edge would be up to 10 % late, and the extrapolation below multiplies that).
 */
function logQuantileOf(histogram: Histogram, q: number): number {
  const total = sumOf(histogram);
  let seen = 0;
  for (const { bucket, weight } of histogram) {
    if (weight > 0 && seen + weight >= q * total) {
      const upper = Math.log(bucketMs(bucket));
      return upper - Math.log(GROWTH) * (1 - (q * total - seen) / weight);
    }
    seen += weight;
  }
  return Math.log(bucketMs(histogram[histogram.length - 1]!.bucket));
}

/**
 * The outlier time of a distribution of times to a final state, in ms, or null when it holds too
 * few samples to bound anything: an upper confidence bound, at `confidence`, of its `quantile`,
 * which knows how many samples it rests on. Nothing distribution-free reaches that far: with n
 * samples the chance that the next one exceeds the largest is 1 / (n + 1), so the 99.9th
 * percentile needs thousands of samples before even the largest bounds it. So the tail is taken
 * as log-normal (the time to final is a product of delays), measured in the body, and
 * extrapolated as a one-sided tolerance bound:
 * - location m and spread s on the log scale from the median and the {@link BODY_QUANTILE}
 *   (robust: orders stuck for hours, whose late samples a log-mean and standard deviation would
 *   count in full, do not hide the outliers they are; a spread below one bucket counts as one
 *   bucket, what the histogram resolves);
 * - the bound exp(m + K · s), with K the smallest factor that covers the quantile's z with the
 *   confidence's z standard errors of m + K · s itself, from the asymptotic (co)variances of the
 *   two sample quantiles (as Natrella's factor does for a mean and a standard deviation); n is
 *   the samples by weight (after fading, fewer than were seen: on the safe side).
 * For the simulator's profile (median 20 s, p99 180 s) the bound is about 3 times the true
 * 99.9th percentile with 50 samples, 1.6 times with 200 and 1.25 times with 1000. Its
 * calibration is tested (pace-math.test.ts).
 */
export function outlierBoundMs(
  histogram: Histogram,
  { quantile = OUTLIER_QUANTILE, confidence = OUTLIER_CONFIDENCE } = {},
): number | null {
  const n = sumOf(histogram);
  if (!(n > 0)) return null;
  const zBody = normalQuantile(BODY_QUANTILE);
  const zQuantile = normalQuantile(quantile);
  // Asymptotic variances and covariance of the sample median and q0.9, in units of s² / n.
  const dMedian = normalDensity(0);
  const dBody = normalDensity(zBody);
  const vMedian = 0.25 / dMedian ** 2;
  const vBody = (BODY_QUANTILE * (1 - BODY_QUANTILE)) / dBody ** 2;
  const cov = (0.5 * (1 - BODY_QUANTILE)) / (dMedian * dBody);
  // K = zBody · u solves (K − zQuantile)² = zConfidence² / n · Var(m + K · s) / s², a quadratic in u.
  const e = normalQuantile(confidence) ** 2 / n;
  const a = zBody ** 2 - e * (vMedian + vBody - 2 * cov);
  const b = -2 * zBody * zQuantile - 2 * e * (cov - vMedian);
  const c = zQuantile ** 2 - e * vMedian;
  const discriminant = b * b - 4 * a * c;
  if (!(a > 0 && discriminant >= 0)) return null;
  const u = (-b + Math.sqrt(discriminant)) / (2 * a);
  const median = logQuantileOf(histogram, 0.5);
  const spread = Math.max((logQuantileOf(histogram, BODY_QUANTILE) - median) / zBody, Math.log(GROWTH));
  return Math.exp(median + zBody * u * spread);
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
 * SUCCESS and FAILED together; null for none) once it holds `minSamples`, else every product's
 * together (`all`), else null; with the median webhook delivery delay (0 until `minSamples`
 * arrived).
 */
export function estimatePace(
  { quantile, minSamples }: PaceSettings,
  histograms: { delivery: Histogram; own: Histogram | null; all: Histogram },
): PaceEstimate | null {
  const delivery = quantileOf(histograms.delivery, 0.5, minSamples) ?? 0;
  const { own } = histograms;
  if (own !== null) {
    const finalMs = quantileOf(own, quantile, minSamples);
    if (finalMs !== null) {
      const outlierMs = outlierBoundMs(own) ?? Number.POSITIVE_INFINITY;
      return { finalMs, outlierMs, deliveryMs: delivery, samples: sumOf(own), scope: 'product' };
    }
  }
  const { all } = histograms;
  const finalMs = quantileOf(all, quantile, minSamples);
  if (finalMs === null) return null;
  const outlierMs = outlierBoundMs(all) ?? Number.POSITIVE_INFINITY;
  return { finalMs, outlierMs, deliveryMs: delivery, samples: sumOf(all), scope: 'all' };
}
