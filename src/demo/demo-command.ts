import { type Command, InvalidArgumentError, Option } from 'commander';
import { DEMO_TIME_SCALE } from './defaults.js';

function wholeNumber(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 50)
    throw new InvalidArgumentError('expected a whole number from 1 to 50');
  return n;
}

function timeScaleArg(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0 || n > 1)
    throw new InvalidArgumentError('expected a number above 0, at most 1');
  return n;
}

function upstreamCount(value: string): 1 | 2 {
  if (value !== '1' && value !== '2') throw new InvalidArgumentError('expected 1 or 2');
  return Number(value) as 1 | 2;
}

/** What the command does, loaded when it runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./demo-actions.js');

/** Registers `h2h-sync demo`. */
export function registerDemoCommand(program: Command): void {
  program
    .command('demo')
    .description(
      'run everything on embedded defaults against the simulator with faults, and show that every order converges',
    )
    .option(
      '--upstreams <n>',
      '1: one upstream, every simulator timeline; 2: two upstreams (default, and beta: cheaper, failing part of its orders, running out of balance), orders routed by price and failing over (docs/demo.md)',
      upstreamCount,
      1,
    )
    .option('--per-timeline <n>', 'orders per simulator timeline (one upstream)', wholeNumber, 5)
    .option('--seed <n>', 'seed of the simulator faults and timings', wholeNumber, 1)
    .addOption(
      new Option('--profile <name>', 'simulator timing profile (docs/simulator.md)')
        .choices(['fast', 'realistic'])
        .default('realistic'),
    )
    .option(
      '--time-scale <factor>',
      'simulator time scale (0.02: 50 simulated seconds per real second)',
      timeScaleArg,
      DEMO_TIME_SCALE,
    )
    .option('--json', 'print the report as JSON')
    .action(async (flags, command: Command) => {
      if (flags.upstreams === 2 && command.getOptionValueSource('perTimeline') === 'cli') {
        command.error(
          "error: option '--per-timeline' is for one upstream: with --upstreams 2 the shop places 16 orders at once, then 4 more (docs/demo.md)",
        );
      }
      return (await actions()).demo(flags);
    });
}
