import type { Logger } from 'pino';
import { z } from 'zod';
import { PROFILE_NAMES, type ProfileName, SIMULATOR_DEFAULTS } from './defaults.js';
import { type Faults, faultsPatchSchema } from './faults.js';
import type { Fixture } from './fixture.js';
import { type RealisticSettings, realisticSettingsSchema } from './profile.js';

/** Options of {@link createSimulator}. Every one but `fixture` has a default. */
export interface SimulatorOptions {
  /** A fixture object, or the path of a JSON fixture file (docs/simulator.md, "Fixture"). */
  fixture: Fixture | string;
  /** Address to listen on. Default `'127.0.0.1'`. */
  host?: string;
  /** Port to listen on. Default `0`: a free port (read it from `origin`). */
  port?: number;
  /**
   * Multiplies every simulated delay: status steps, the profile's webhook delays, the webhook
   * retry schedule, the reorder hold, stuck orders and scheduled refunds. Default `1`; `0.001`
   * turns a 1-minute retry into 60 ms. The `*_ms` faults are real time and never scaled; the
   * rate window only with `scaleRateWindow`. Give `speed` instead to say it the other way round.
   */
  timeScale?: number;
  /**
   * Simulated seconds per real second: `speed: 60` runs one simulated minute per real second,
   * the same as `timeScale: 1/60`. Give `timeScale` or `speed`, not both.
   */
  speed?: number;
  /** `'fast'` (default: fixed 2 s steps, webhooks at once) or `'realistic'` (seeded distributions). */
  profile?: ProfileName;
  /** Settings of the realistic profile; override the fixture's `realistic`, field by field. */
  realistic?: RealisticSettings;
  /**
   * When true the rate window is simulated time too: `rateWindowMs × timeScale` real ms, so that
   * the limit stays "60 per simulated minute" in a time-scaled run. Default `false`.
   */
  scaleRateWindow?: boolean;
  /** Seeds the random sources of fault draws and of the realistic profile, so that a run repeats. Default `1`. */
  seed?: number;
  /** Requests per rolling minute per member over the whole member API. Default `60`; `0` = unlimited. */
  rateLimit?: number;
  /**
   * Length of the rolling rate window in real ms. Default `60000` (spec §8); tests shorten it so
   * that a proof of "never over the limit" does not take minutes.
   */
  rateWindowMs?: number;
  /** A webhook attempt not answered 2xx within this many ms has failed. Default `10000`. */
  webhookTimeoutMs?: number;
  /**
   * Faults on from the start, as `POST /__sim/faults` takes them; `POST /__sim/reset` comes back
   * to them. Default: none.
   */
  faults?: Partial<Faults>;
  /** Where the simulator logs (and Fastify its requests). Default: nothing is logged. */
  logger?: Logger;
}

/** The options of {@link SimulatorOptions} but the fixture and the logger, with their ranges and defaults. */
export const scalarOptionsSchema = z.object({
  host: z.string().min(1, 'must be a non-empty host name or address').default(SIMULATOR_DEFAULTS.host),
  port: z.number().int().min(0).max(65_535).default(SIMULATOR_DEFAULTS.port),
  timeScale: z.number().min(0).max(1_000).optional(),
  speed: z.number().positive().max(1_000_000).optional(),
  profile: z.enum(PROFILE_NAMES).default(SIMULATOR_DEFAULTS.profile),
  realistic: realisticSettingsSchema.optional(),
  scaleRateWindow: z.boolean().default(SIMULATOR_DEFAULTS.scaleRateWindow),
  seed: z
    .number()
    .int()
    .min(-(2 ** 31))
    .max(2 ** 31 - 1)
    .default(SIMULATOR_DEFAULTS.seed),
  rateLimit: z.number().int().min(0).max(1_000_000).default(SIMULATOR_DEFAULTS.rateLimit),
  rateWindowMs: z.number().int().min(100).max(3_600_000).default(SIMULATOR_DEFAULTS.rateWindowMs),
  webhookTimeoutMs: z.number().int().min(1).max(600_000).default(SIMULATOR_DEFAULTS.webhookTimeoutMs),
  faults: faultsPatchSchema.default({}),
});
export type ResolvedSimulatorOptions = Omit<z.output<typeof scalarOptionsSchema>, 'timeScale' | 'speed'> & {
  timeScale: number;
};

/** Applies the defaults and checks ranges; throws a RangeError naming the option. */
export function resolveSimulatorOptions(options: SimulatorOptions): ResolvedSimulatorOptions {
  const { fixture: _fixture, logger: _logger, ...scalars } = options;
  const result = scalarOptionsSchema.safeParse(scalars);
  if (result.success) {
    const { timeScale, speed, ...rest } = result.data;
    if (timeScale !== undefined && speed !== undefined) {
      throw new RangeError('simulator options timeScale and speed: give one of them, not both');
    }
    return {
      ...rest,
      timeScale: speed !== undefined ? 1 / speed : (timeScale ?? SIMULATOR_DEFAULTS.timeScale),
    };
  }
  const issue = result.error.issues[0]!;
  throw new RangeError(`simulator option ${issue.path.join('.')}: ${issue.message}`);
}
