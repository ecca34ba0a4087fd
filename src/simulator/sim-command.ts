import { type Command, InvalidArgumentError, Option } from 'commander';
import { pino } from 'pino';
import { DEFAULT_LOG_LEVEL, LOG_LEVELS } from '../observability/defaults.js';
import { exitGracefully } from '../shared/graceful-shutdown.js';
import { createSimulator } from './index.js';
import { PROFILE_NAMES, type ProfileName } from './profile.js';
import { registerSimTriggerCommand } from './sim-trigger-command.js';
import { SIMULATOR_DEFAULTS } from './simulator-options.js';

/** Longest stop of `h2h-sync sim` (webhooks in flight are cut off); close-with-grace's own default. */
const SIM_STOP_TIMEOUT_MS = 10_000;

/** A commander argument parser for a number in [min, max] (an integer unless `fraction`). */
function numberIn(flag: string, min: number, max: number, fraction = false) {
  return (raw: string): number => {
    const value = Number(raw);
    const ok = raw.trim() !== '' && Number.isFinite(value) && (fraction || Number.isInteger(value));
    if (!ok || value < min || value > max) {
      const kind = fraction ? 'a number' : 'an integer';
      throw new InvalidArgumentError(`${flag} must be ${kind} from ${min} to ${max} (got "${raw}")`);
    }
    return value;
  };
}

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

/**
 * Registers `h2h-sync sim`: runs the upstream simulator (docs/simulator.md) until SIGINT or
 * SIGTERM, after printing `simulator listening: <base URL>`, and stops like the receiver and the
 * worker ({@link exitGracefully}).
 */
export function registerSimCommand(program: Command): void {
  const sim = program
    .command('sim')
    .description('run the upstream simulator (docs/simulator.md)')
    .option('--fixture <path>', 'JSON fixture file, e.g. fixtures/demo.json (required)')
    .option('--port <port>', 'port to listen on; 0 = a free one', numberIn('--port', 0, 65_535), 4010)
    .option('--host <host>', 'address to listen on', SIMULATOR_DEFAULTS.host)
    .addOption(
      new Option('--profile <name>', 'timing profile (docs/simulator.md, "Profiles")')
        .choices(PROFILE_NAMES)
        .default(SIMULATOR_DEFAULTS.profile),
    )
    .option(
      '--time-scale <factor>',
      'multiplies every simulated delay (0.001: a 1-minute retry takes 60 ms); default 1',
      numberIn('--time-scale', 0, 1_000, true),
    )
    .addOption(
      new Option(
        '--speed <n>',
        'simulated seconds per real second (60: a simulated minute per second); instead of --time-scale',
      )
        .argParser(numberIn('--speed', 0.001, 1_000_000, true))
        .conflicts('timeScale'),
    )
    .option(
      '--scale-rate-window',
      'the rate window is simulated time too (rate-window-ms × time scale)',
      false,
    )
    .option(
      '--seed <n>',
      'seed of the fault and profile random sources',
      numberIn('--seed', 0, 2 ** 31 - 1),
      1,
    )
    .option(
      '--rate-limit <n>',
      'requests per rolling minute per member; 0 = unlimited',
      numberIn('--rate-limit', 0, 1_000_000),
      SIMULATOR_DEFAULTS.rateLimit,
    )
    .option(
      '--rate-window-ms <ms>',
      'length of the rolling rate window',
      numberIn('--rate-window-ms', 100, 3_600_000),
      SIMULATOR_DEFAULTS.rateWindowMs,
    )
    .option(
      '--webhook-timeout-ms <ms>',
      'a webhook not answered 2xx within this fails',
      numberIn('--webhook-timeout-ms', 1, 600_000),
      SIMULATOR_DEFAULTS.webhookTimeoutMs,
    )
    .addOption(
      new Option('--log-level <level>', 'pino log level').choices(LOG_LEVELS).default(DEFAULT_LOG_LEVEL),
    )
    .action(async (flags: SimFlags, command: Command) => {
      // Checked here, not with requiredOption: commander would demand it of `sim trigger` too.
      if (flags.fixture === undefined)
        command.error("error: required option '--fixture <path>' not specified");
      const logger = pino({ level: flags.logLevel });
      let sim: Awaited<ReturnType<typeof createSimulator>>;
      try {
        sim = await createSimulator({
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
        timeoutMs: SIM_STOP_TIMEOUT_MS,
        close: async () => {
          await sim.close();
          process.stdout.write('simulator stopped\n');
          return true;
        },
      });
      process.stdout.write(`simulator listening: ${sim.baseUrl}\n`);
      process.stdout.write(`control API: ${sim.origin}/__sim\n`);
    });
  registerSimTriggerCommand(sim);
}
