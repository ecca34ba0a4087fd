import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import { normalQuantile } from '../../src/domain/normal.js';
import {
  GROWTH,
  type Histogram,
  OUTLIER_CONFIDENCE,
  OUTLIER_QUANTILE,
  outlierBoundMs,
  paceBucket,
  quantileOf,
} from '../../src/domain/pace-math.js';

/** `n` log-normal durations (median `medianMs`, log-scale spread `sigma`) from a seeded stream, in ms. */
function logNormalSamples(seed: number, n: number, medianMs: number, sigma: number): number[] {
  const generator = xoroshiro128plus(seed);
  const random = () => uniformFloat64(generator);
  return Array.from({ length: n }, () => {
    const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
    return medianMs * Math.exp(sigma * z);
  });
}

/** The histogram of durations, as the reconciler fills it (learn-pace.ts). */
function histogramOf(durations: number[]): Histogram {
  const weights = new Map<number, number>();
  for (const ms of durations) weights.set(paceBucket(ms), (weights.get(paceBucket(ms)) ?? 0) + 1);
  return [...weights].sort(([a], [b]) => a - b).map(([bucket, weight]) => ({ bucket, weight }));
}

/** P(Z > z) for the standard normal (Abramowitz and Stegun 7.1.26 via erfc; error < 1.5e-7). */
function normalTail(z: number): number {
  const x = Math.abs(z) / Math.SQRT2;
  const t = 1 / (1 + 0.327_591_1 * x);
  const poly =
    t *
    (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
  const tail = 0.5 * poly * Math.exp(-x * x);
  return z >= 0 ? tail : 1 - tail;
}

test('the outlier time is calibrated: beyond it lie at most 1 in 1000 of fresh log-normal samples, in 95 % of draws, from 50 samples on', () => {
  // Many draws of (spread, sample size, seed); each learns a histogram and bounds its 99.9th
  // percentile. A draw misses when more than 1 − OUTLIER_QUANTILE of the true distribution lies
  // beyond its bound: at most 1 − OUTLIER_CONFIDENCE of draws should, plus three standard errors
  // of the share (the draws are a fixed sample: fast-check's seed is fixed).
  const draws = fc.sample(
    fc.record({
      sigma: fc.double({ min: 0.2, max: 2.5, noNaN: true }),
      n: fc.integer({ min: 50, max: 1000 }),
      seed: fc.integer(),
    }),
    { numRuns: 1000, seed: 20_261_126 },
  );
  const medianMs = 20_000;
  let misses = 0;
  for (const { sigma, n, seed } of draws) {
    const bound = outlierBoundMs(histogramOf(logNormalSamples(seed, n, medianMs, sigma)))!;
    const beyond = normalTail(Math.log(bound / medianMs) / sigma);
    if (beyond > 1 - OUTLIER_QUANTILE) misses++;
  }
  const target = 1 - OUTLIER_CONFIDENCE;
  const slack = 3 * Math.sqrt((target * (1 - target)) / draws.length);
  assert.ok(misses / draws.length <= target + slack, `${misses} of ${draws.length} draws missed`);
  // And not by being useless: in the simulator's profile (median 20 s, p99 180 s) with 1000
  // samples it is within 1.6 times the true 99.9th percentile.
  const sigma = Math.log(9) / normalQuantile(0.99);
  const truth = medianMs * Math.exp(sigma * normalQuantile(OUTLIER_QUANTILE));
  const bound = outlierBoundMs(histogramOf(logNormalSamples(7, 1000, medianMs, sigma)))!;
  assert.ok(bound >= truth && bound <= 1.6 * truth, `bound ${bound} ms, true 99.9th percentile ${truth} ms`);
});

const histograms = fc
  .array(fc.record({ bucket: fc.integer({ min: 1, max: 200 }), weight: fc.integer({ min: 1, max: 300 }) }), {
    minLength: 1,
    maxLength: 40,
  })
  .map((rows) => {
    const weights = new Map<number, number>();
    for (const { bucket, weight } of rows) weights.set(bucket, (weights.get(bucket) ?? 0) + weight);
    return [...weights].sort(([a], [b]) => a - b).map(([bucket, weight]) => ({ bucket, weight }));
  })
  .filter((h) => h.reduce((sum, { weight }) => sum + weight, 0) >= 50);

test('the outlier time knows its sample size: the same shape from more samples gives a lower bound, never below its body', () => {
  fc.assert(
    fc.property(histograms, fc.integer({ min: 2, max: 20 }), (histogram, times) => {
      const few = outlierBoundMs(histogram)!;
      const many = outlierBoundMs(
        histogram.map(({ bucket, weight }) => ({ bucket, weight: weight * times })),
      )!;
      assert.ok(many < few, `${times} times the samples: ${many} ms, not below ${few} ms`);
      // Above the body it is extrapolated from: the 90th percentile (read as its bucket's upper edge).
      assert.ok(many > quantileOf(histogram, 0.9, 1)! / GROWTH, `${many} ms within the body`);
    }),
    { seed: 20_261_126 },
  );
});

test('the outlier time scales with the durations: the same histogram a bucket later is GROWTH times later', () => {
  fc.assert(
    fc.property(histograms, fc.integer({ min: 1, max: 50 }), (histogram, shift) => {
      const later = histogram.map(({ bucket, weight }) => ({ bucket: bucket + shift, weight }));
      const ratio = outlierBoundMs(later)! / outlierBoundMs(histogram)!;
      assert.ok(Math.abs(ratio / GROWTH ** shift - 1) < 1e-9, `ratio ${ratio} for a shift of ${shift}`);
    }),
    { seed: 20_261_126 },
  );
});

test('orders stuck for hours among the samples do not hide the outliers they are', () => {
  // The simulator's profile with 1 % of the orders finishing after about two hours: their late
  // samples make the plain 99.9th percentile hours; the bound, measured in the body, barely moves.
  const sigma = Math.log(9) / normalQuantile(0.99);
  const clean = logNormalSamples(11, 990, 20_000, sigma);
  const stuck = logNormalSamples(12, 10, 7_200_000, 0.6);
  const withStuck = histogramOf([...clean, ...stuck]);
  assert.ok(quantileOf(withStuck, OUTLIER_QUANTILE, 1)! > 3_600_000);
  const bound = outlierBoundMs(withStuck)!;
  const cleanBound = outlierBoundMs(histogramOf(clean))!;
  assert.ok(bound < 1.25 * cleanBound, `${bound} ms with stuck orders, ${cleanBound} ms without`);
});

test('too few samples bound nothing; one bucket of them is bounded by its resolution', () => {
  assert.equal(outlierBoundMs([]), null);
  assert.equal(outlierBoundMs([{ bucket: 100, weight: 5 }]), null);
  assert.ok(outlierBoundMs([{ bucket: 100, weight: 6 }])! > outlierBoundMs([{ bucket: 100, weight: 50 }])!);
  // Every sample in one bucket: the spread counts as one bucket's width, so the bound is finite
  // and beyond the bucket.
  const one = outlierBoundMs([{ bucket: 100, weight: 50 }])!;
  assert.ok(one > GROWTH ** 100 && one < GROWTH ** 100 * 2, `${one} ms`);
});
