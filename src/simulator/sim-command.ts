import { type Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_LOG_LEVEL, LOG_LEVELS } from '../observability/defaults.js';
import { PROFILE_NAMES, SIMULATOR_DEFAULTS } from './defaults.js';
import { registerSimTriggerCommand } from './sim-trigger-command.js';

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

/** Flags that `--upstreams` refuses: its file sets them per upstream. `--log-level` applies to all. */
const UPSTREAM_SETTINGS_IN_THE_FILE = [
  'fixture',
  'port',
  'host',
  'profile',
  'timeScale',
  'speed',
  'scaleRateWindow',
  'seed',
  'rateLimit',
  'rateWindowMs',
  'webhookTimeoutMs',
];

/** What the command does, loaded when it runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./sim-actions.js');

/**
 * Registers `h2h-sync sim`: runs the upstream simulator (docs/simulator.md), or with
 * `--upstreams` several, until SIGINT or SIGTERM, after printing `simulator listening: <base URL>`
 * (one line per upstream), and stops like the receiver and the worker (`exitGracefully`).
 */
export function registerSimCommand(program: Command): void {
  const sim = program
    .command('sim')
    .description('run the upstream simulator (docs/simulator.md)')
    .option('--fixture <path>', 'JSON fixture file, e.g. fixtures/demo.json (required, unless --upstreams)')
    .addOption(
      new Option(
        '--upstreams <file>',
        'run several upstreams, as a JSON file lists them (e.g. fixtures/two-upstreams.json; docs/simulator.md, "Several upstreams")',
      ).conflicts(UPSTREAM_SETTINGS_IN_THE_FILE),
    )
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
    .action(async (flags, command) => (await actions()).sim(flags, command));
  registerSimTriggerCommand(sim);
}
