import type { Command } from 'commander';
import { pino } from 'pino';
import { DEFAULT_SHUTDOWN_TIMEOUT_MS } from '../shared/defaults.js';
import { exitGracefully } from '../shared/graceful-shutdown.js';
import type { ProfileName } from './defaults.js';
import { createSimulator } from './index.js';

interface SimFlags {
  port: number;
  host: string;
  fixture: string;
  timeScale?: number;
  speed?: number;
  profile: ProfileName;
  scaleRateWindow: boolean;
  seed: number;
  rateLimit: number;
  rateWindowMs: number;
  webhookTimeoutMs: number;
  logLevel: string;
}

/** `sim`: runs the simulator until SIGINT or SIGTERM. */
export const sim = async (flags: SimFlags, command: Command) => {
  // Checked here, not with requiredOption: commander would demand it of `sim trigger` too.
  if (flags.fixture === undefined) command.error("error: required option '--fixture <path>' not specified");
  const logger = pino({ level: flags.logLevel });
  let simulator: Awaited<ReturnType<typeof createSimulator>>;
  try {
    simulator = await createSimulator({
      fixture: flags.fixture,
      host: flags.host,
      port: flags.port,
      ...(flags.timeScale !== undefined ? { timeScale: flags.timeScale } : {}),
      ...(flags.speed !== undefined ? { speed: flags.speed } : {}),
      profile: flags.profile,
      scaleRateWindow: flags.scaleRateWindow,
      seed: flags.seed,
      rateLimit: flags.rateLimit,
      rateWindowMs: flags.rateWindowMs,
      webhookTimeoutMs: flags.webhookTimeoutMs,
      logger,
    });
  } catch (error) {
    process.stderr.write(`h2h-sync sim: ${(error as Error).message}\n`);
    process.exitCode = 1;
    return;
  }
  // Before the lines that say it listens: a signal sent on them is always handled.
  exitGracefully({
    name: 'simulator',
    logger,
    // Webhooks still in flight past it are cut off.
    timeoutMs: DEFAULT_SHUTDOWN_TIMEOUT_MS,
    close: async () => {
      await simulator.close();
      process.stdout.write('simulator stopped\n');
      return true;
    },
  });
  process.stdout.write(`simulator listening: ${simulator.baseUrl}\n`);
  process.stdout.write(`control API: ${simulator.origin}/__sim\n`);
};
