import { type Command, InvalidArgumentError, Option } from 'commander';
import { dayProblem, parseUtcOffset } from '../report-days.js';

/** What the command does, loaded when it runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./report-actions.js');

function day(text: string): string {
  const problem = dayProblem(text);
  if (problem !== undefined) throw new InvalidArgumentError(problem);
  return text;
}

function utcOffset(text: string): number {
  const parsed = parseUtcOffset(text);
  if ('problem' in parsed) throw new InvalidArgumentError(parsed.problem);
  return parsed.minutes;
}

/** Registers `report`. */
export function registerReportCommand(program: Command): void {
  program
    .command('report')
    .description(
      'the settlement with each supplier: per day, upstream and product, attempts by final state, money spent, credited back and net; open attempts apart (docs/settlement.md)',
    )
    .requiredOption('--from <day>', 'first day, YYYY-MM-DD (included)', day)
    .requiredOption('--to <day>', 'last day, YYYY-MM-DD (included)', day)
    .option('--upstream <name>', "one supplier's attempts only (default: every upstream's)")
    .option(
      '--tz <offset>',
      'the days are from midnight to midnight at this offset from UTC, e.g. +07:00',
      utcOffset,
      0,
    )
    .addOption(new Option('--csv', 'print the lines as CSV with a header row').conflicts('json'))
    .option('--json', 'print JSON')
    .action(async (flags, command: Command) => {
      if (flags.from > flags.to) {
        command.error(`error: --from ${flags.from} is after --to ${flags.to}`, { exitCode: 2 });
      }
      await (await actions()).report(flags);
    });
}
