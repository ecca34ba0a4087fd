import type { Command } from 'commander';
import { type Logger, pino } from 'pino';
import { DEFAULT_SHUTDOWN_TIMEOUT_MS } from '../shared/defaults.js';
import { exitGracefully } from '../shared/graceful-shutdown.js';
import type { ProfileName } from './defaults.js';
import { createSimulator } from './index.js';
import { startSimulatedUpstreams } from './simulated-upstreams.js';
import { readUpstreamsFile } from './upstreams-file.js';

interface SimFlags {
  port: number;
  host: string;
  fixture?: string;
  upstreams?: string;
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

/** What `sim` runs: one simulator, or the upstreams of `--upstreams`, each with a label for its lines. */
interface Running {
  listening: { label: string; origin: string; baseUrl: string }[];
  close(): Promise<void>;
}

/** `sim`: runs the simulator (or, with `--upstreams`, several) until SIGINT or SIGTERM. */
export const sim = async (flags: SimFlags, command: Command) => {
  // Checked here, not with requiredOption: commander would demand it of `sim trigger` too.
  if (flags.fixture === undefined && flags.upstreams === undefined) {
    command.error("error: required option '--fixture <path>' not specified (or --upstreams <file>)");
  }
  const logger = pino({ level: flags.logLevel });
  let running: Running;
  try {
    running =
      flags.upstreams !== undefined
        ? await startUpstreams(flags.upstreams, logger)
        : await startOne(flags, logger);
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
      await running.close();
      process.stdout.write('simulator stopped\n');
      return true;
    },
  });
  for (const { label, baseUrl, origin } of running.listening) {
    process.stdout.write(`simulator listening: ${baseUrl}${label}\n`);
    process.stdout.write(`control API: ${origin}/__sim${label}\n`);
  }
};

async function startOne(flags: SimFlags, logger: Logger): Promise<Running> {
  const simulator = await createSimulator({
    fixture: flags.fixture!,
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
  return { listening: [{ label: '', ...simulator }], close: () => simulator.close() };
}

/** Every upstream of the file, each logging with `upstream: <name>`; its lines end in ` (<name>)`. */
async function startUpstreams(file: string, logger: Logger): Promise<Running> {
  const options = await readUpstreamsFile(file);
  const started = await startSimulatedUpstreams(
    options.map((upstream) => ({ ...upstream, logger: logger.child({ upstream: upstream.name }) })),
  );
  return {
    listening: started.upstreams.map(({ name, origin, baseUrl }) => ({
      label: ` (${name})`,
      origin,
      baseUrl,
    })),
    close: () => started.close(),
  };
}
