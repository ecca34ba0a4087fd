import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';
import { z } from 'zod';
import type { ProfileName } from './defaults.js';
import type { ProgressionStep } from './status-progression.js';
import { STATUS_STEP_MS } from './status-progression.js';

/** z of the standard normal distribution at 0.99. */
const Z_99 = 2.326_347_874_040_841;

/** A log-normal distribution given by its median and 99th percentile, in simulated seconds. */
export const lognormalSchema = z
  .strictObject({
    median_s: z.number().positive('must be > 0'),
    p99_s: z.number().positive('must be > 0'),
  })
  .refine((d) => d.p99_s >= d.median_s, { message: 'p99_s must be >= median_s', path: ['p99_s'] });
export type Lognormal = z.output<typeof lognormalSchema>;

/** Settings of the realistic profile; every field has a default (REALISTIC_DEFAULTS). */
export const realisticSettingsSchema = z.strictObject({
  /** Time from creation to the final status of the timeline, for every product without its own. */
  completion: lognormalSchema.optional(),
  /** Per product code: its own completion-time distribution. */
  completion_by_product: z.record(z.string(), lognormalSchema).optional(),
  /** Delay before each webhook attempt (first and retries). */
  webhook_delay: lognormalSchema.optional(),
  /** Share of orders (0..1) that stay PROCESSING for `stuck_duration` before they complete. */
  stuck_share: z.number().min(0, 'must be between 0 and 1').max(1, 'must be between 0 and 1').optional(),
  /** How long a stuck order stays PROCESSING. */
  stuck_duration: lognormalSchema.optional(),
});
export type RealisticSettings = z.input<typeof realisticSettingsSchema>;

export interface ResolvedRealisticSettings {
  completion: Lognormal;
  completion_by_product: Record<string, Lognormal>;
  webhook_delay: Lognormal;
  stuck_share: number;
  stuck_duration: Lognormal;
}

export const REALISTIC_DEFAULTS: Readonly<ResolvedRealisticSettings> = Object.freeze({
  completion: { median_s: 20, p99_s: 180 },
  completion_by_product: {},
  webhook_delay: { median_s: 0.3, p99_s: 5 },
  stuck_share: 0.01,
  stuck_duration: { median_s: 7_200, p99_s: 28_800 },
});

/** Layers the given settings over the defaults (later layers win, field by field). */
export function resolveRealistic(...layers: (RealisticSettings | undefined)[]): ResolvedRealisticSettings {
  const resolved: ResolvedRealisticSettings = {
    ...REALISTIC_DEFAULTS,
    completion_by_product: { ...REALISTIC_DEFAULTS.completion_by_product },
  };
  for (const layer of layers) {
    if (!layer) continue;
    const parsed = realisticSettingsSchema.parse(layer);
    if (parsed.completion) resolved.completion = parsed.completion;
    if (parsed.webhook_delay) resolved.webhook_delay = parsed.webhook_delay;
    if (parsed.stuck_share !== undefined) resolved.stuck_share = parsed.stuck_share;
    if (parsed.stuck_duration) resolved.stuck_duration = parsed.stuck_duration;
    Object.assign(resolved.completion_by_product, parsed.completion_by_product);
  }
  return resolved;
}

/** One planned status change: the step and its wait after creation, in simulated ms. */
export interface PlannedStep extends ProgressionStep {
  readonly at_ms: number;
}

/** An order's drawn timeline. */
export interface Timeline {
  readonly steps: readonly PlannedStep[];
  /** True when the order stays PROCESSING for hours (realistic profile only). */
  readonly stuck: boolean;
}

/** Draws the timelines and webhook delays of one run. */
export interface TimingProfile {
  readonly name: ProfileName;
  /** The timeline of a new order of `productCode` following `progression`. */
  timeline(productCode: string, progression: readonly ProgressionStep[]): Timeline;
  /** Simulated ms before a webhook attempt is sent. */
  webhookDelayMs(): number;
  /** Back to the seed (the control API's reset). */
  reset(): void;
}

/** The present fixed timelines: step i at 2 s × i, webhooks at once. Draws nothing. */
export class FastProfile implements TimingProfile {
  readonly name = 'fast';
  timeline(_productCode: string, progression: readonly ProgressionStep[]): Timeline {
    return { steps: progression.map((s, i) => ({ ...s, at_ms: STATUS_STEP_MS * (i + 1) })), stuck: false };
  }
  webhookDelayMs(): number {
    return 0;
  }
  reset(): void {}
}

/** A seeded source of log-normal draws (Box–Muller over pure-rand's xoroshiro128+). */
export class LognormalSampler {
  private random: RandomGenerator;
  constructor(private readonly seed: number) {
    this.random = xoroshiro128plus(seed);
  }
  reset(): void {
    this.random = xoroshiro128plus(this.seed);
  }
  uniform(): number {
    return uniformFloat64(this.random);
  }
  /** One draw in seconds. */
  lognormal({ median_s, p99_s }: Lognormal): number {
    const sigma = Math.log(p99_s / median_s) / Z_99;
    if (sigma === 0) return median_s;
    const u1 = 1 - this.uniform(); // (0, 1]
    const u2 = this.uniform();
    const normal = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
    return median_s * Math.exp(sigma * normal);
  }
}

/**
 * Seed offsets of the profile's two random sources, so that neither shares a stream with the
 * faults. Timelines and webhook delays draw from separate streams: how many webhook attempts
 * happened before an order was created depends on real-time races, and must not change the
 * order's timeline.
 */
const TIMELINE_SEED_SALT = 0x5bd1e995;
const WEBHOOK_SEED_SALT = 0x27d4eb2f;

/**
 * Realistic timelines. The last step of the progression comes at the drawn completion time and
 * the others evenly before it. A stuck order goes PROCESSING at the drawn completion time (if
 * its timeline has no PROCESSING of its own) and reaches the rest of its timeline only after
 * `stuck_duration`. An empty progression (suffix 0007) stays empty.
 */
export class RealisticProfile implements TimingProfile {
  readonly name = 'realistic';
  private readonly sampler: LognormalSampler;
  private readonly webhookSampler: LognormalSampler;

  constructor(
    readonly settings: ResolvedRealisticSettings,
    seed: number,
  ) {
    this.sampler = new LognormalSampler((seed ^ TIMELINE_SEED_SALT) | 0);
    this.webhookSampler = new LognormalSampler((seed ^ WEBHOOK_SEED_SALT) | 0);
  }

  timeline(productCode: string, progression: readonly ProgressionStep[]): Timeline {
    if (progression.length === 0) return { steps: [], stuck: false };
    const distribution = this.settings.completion_by_product[productCode] ?? this.settings.completion;
    const completionMs = this.sampler.lognormal(distribution) * 1000;
    const stuck = this.settings.stuck_share > 0 && this.sampler.uniform() < this.settings.stuck_share;
    if (!stuck) {
      const n = progression.length;
      return { steps: progression.map((s, i) => ({ ...s, at_ms: (completionMs * (i + 1)) / n })), stuck };
    }
    const stuckMs = this.sampler.lognormal(this.settings.stuck_duration) * 1000;
    const rest = progression[0]!.status === 'PROCESSING' ? progression.slice(1) : progression;
    const steps: PlannedStep[] = [{ status: 'PROCESSING', withSerial: false, at_ms: completionMs }];
    rest.forEach((s, i) => {
      steps.push({ ...s, at_ms: completionMs + (stuckMs * (i + 1)) / rest.length });
    });
    return { steps, stuck };
  }

  webhookDelayMs(): number {
    return this.webhookSampler.lognormal(this.settings.webhook_delay) * 1000;
  }

  reset(): void {
    this.sampler.reset();
    this.webhookSampler.reset();
  }
}

export function createProfile(
  name: ProfileName,
  seed: number,
  settings: ResolvedRealisticSettings,
): TimingProfile {
  return name === 'realistic' ? new RealisticProfile(settings, seed) : new FastProfile();
}
