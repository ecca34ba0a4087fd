import { DEFAULT_RATE_LIMIT_PER_MINUTE } from '../upstream/model.js';

/**
 * The simulator's profile names and defaults, in a module that loads no package: the CLI's
 * `sim` and `sim trigger` definitions show them in `--help` without loading the simulator.
 */

/**
 * Timing profiles of the simulator (docs/simulator.md, "Profiles"). `fast`: every status step
 * 2 s after the previous one and webhooks sent at once (the timelines the tests are written
 * against). `realistic`: completion times, webhook delivery delays and stuck orders drawn from
 * seeded log-normal distributions, so a run repeats with the same seed.
 */
export const PROFILE_NAMES = ['fast', 'realistic'] as const;
export type ProfileName = (typeof PROFILE_NAMES)[number];

/** Defaults of `SimulatorOptions` (simulator-options.ts). Every one but `fixture` has a default. */
export const SIMULATOR_DEFAULTS = {
  host: '127.0.0.1',
  port: 0,
  timeScale: 1,
  profile: 'fast',
  scaleRateWindow: false,
  seed: 1,
  rateLimit: DEFAULT_RATE_LIMIT_PER_MINUTE,
  rateWindowMs: 60_000,
  webhookTimeoutMs: 10_000,
} as const;

/** Where `sim trigger` finds the simulator when neither `--sim-url` nor H2H_BASE_URL says. */
export const DEFAULT_SIM_URL = 'http://127.0.0.1:4010';
