import type { Logger } from 'pino';
import { z } from 'zod';
import { DEFAULT_RATE_LIMIT_PER_MINUTE } from '../upstream/model.js';
import type { Fixture } from './fixture.js';

/** Options of {@link createSimulator}. Every one but `fixture` has a default. */
export interface SimulatorOptions {
  /** A fixture object, or the path of a JSON fixture file (docs/simulator.md, "Fixture"). */
  fixture: Fixture | string;
  /** Address to listen on. Default `'127.0.0.1'`. */
  host?: string;
  /** Port to listen on. Default `0`: a free port (read it from `origin`). */
  port?: number;
  /**
   * Multiplies every simulated delay: status steps, the webhook retry schedule and the reorder
   * hold. Default `1`; `0.001` turns a 1-minute retry into 60 ms. The rate window and the
   * `*_ms` faults are real time and never scaled.
   */
  timeScale?: number;
  /** Seeds the random source of every fault draw, so that a run repeats. Default `1`. */
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
  /** Where the simulator logs (and Fastify its requests). Default: nothing is logged. */
  logger?: Logger;
}

export const SIMULATOR_DEFAULTS = {
  host: '127.0.0.1',
  port: 0,
  timeScale: 1,
  seed: 1,
  rateLimit: DEFAULT_RATE_LIMIT_PER_MINUTE,
  rateWindowMs: 60_000,
  webhookTimeoutMs: 10_000,
} as const;

const scalarOptionsSchema = z.object({
  host: z.string().min(1, 'must be a non-empty host name or address').default(SIMULATOR_DEFAULTS.host),
  port: z.number().int().min(0).max(65_535).default(SIMULATOR_DEFAULTS.port),
  timeScale: z.number().min(0).max(1_000).default(SIMULATOR_DEFAULTS.timeScale),
  seed: z
    .number()
    .int()
    .min(-(2 ** 31))
    .max(2 ** 31 - 1)
    .default(SIMULATOR_DEFAULTS.seed),
  rateLimit: z.number().int().min(0).max(1_000_000).default(SIMULATOR_DEFAULTS.rateLimit),
  rateWindowMs: z.number().int().min(100).max(3_600_000).default(SIMULATOR_DEFAULTS.rateWindowMs),
  webhookTimeoutMs: z.number().int().min(1).max(600_000).default(SIMULATOR_DEFAULTS.webhookTimeoutMs),
});
export type ResolvedSimulatorOptions = z.output<typeof scalarOptionsSchema>;

/** Applies the defaults and checks ranges; throws a RangeError naming the option. */
export function resolveSimulatorOptions(options: SimulatorOptions): ResolvedSimulatorOptions {
  const { fixture: _fixture, logger: _logger, ...scalars } = options;
  const result = scalarOptionsSchema.safeParse(scalars);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new RangeError(`simulator option ${issue.path.join('.')}: ${issue.message}`);
}
