import { pino } from 'pino';
import { listeningOrigin } from '../shared/listening-origin.js';
import { API_PREFIX } from '../upstream/model.js';
import { loadFixture } from './fixture.js';
import { createProfile, resolveRealistic } from './profile.js';
import { buildSimApp } from './sim-app.js';
import { SimEngine } from './sim-engine.js';
import { resolveSimulatorOptions, type SimulatorOptions } from './simulator-options.js';

export type { ProfileName } from './defaults.js';
export { SIMULATOR_DEFAULTS } from './defaults.js';
export type { Faults } from './faults.js';
export type { Fixture } from './fixture.js';
export { FixtureError } from './fixture.js';
export type { RealisticSettings } from './profile.js';
export { REALISTIC_DEFAULTS } from './profile.js';
export type { SimulatorOptions } from './simulator-options.js';
export type { WebhookAttemptRecord } from './webhook-dispatcher.js';

/** A running simulator. */
export interface Simulator {
  /** Where it listens, e.g. `http://127.0.0.1:43121`. */
  readonly origin: string;
  /** `origin` + `/v1/member-api`: the base URL a client is configured with. */
  readonly baseUrl: string;
  /** Stops HTTP, every timer and every pending webhook delivery. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * Starts the upstream simulator (docs/simulator.md) and resolves once it listens. Rejects with a
 * FixtureError for a bad fixture and a RangeError for a bad option, naming what to fix.
 */
export async function createSimulator(options: SimulatorOptions): Promise<Simulator> {
  const settings = resolveSimulatorOptions(options);
  const fixture = await loadFixture(options.fixture);
  const engine = new SimEngine({
    fixture,
    timeScale: settings.timeScale,
    seed: settings.seed,
    rateLimit: settings.rateLimit,
    rateWindowMs: settings.scaleRateWindow
      ? Math.max(1, Math.round(settings.rateWindowMs * settings.timeScale))
      : settings.rateWindowMs,
    webhookTimeoutMs: settings.webhookTimeoutMs,
    faults: settings.faults,
    profile: createProfile(
      settings.profile,
      settings.seed,
      resolveRealistic(fixture.realistic, settings.realistic),
    ),
    logger: options.logger ?? pino({ level: 'silent' }),
  });
  const app = buildSimApp(engine, options.logger);
  try {
    await app.listen({ host: settings.host, port: settings.port });
  } catch (error) {
    await engine.close();
    throw error;
  }
  const origin = listeningOrigin(app.server);

  let closing: Promise<void> | undefined;
  const close = async () => {
    engine.abortHeldResponses();
    await app.close();
    await engine.close();
  };
  return {
    origin,
    baseUrl: `${origin}${API_PREFIX}`,
    close: () => {
      closing ??= close();
      return closing;
    },
  };
}
