import { type Command, InvalidArgumentError } from 'commander';

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number of at least 1');
  return n;
}

/** What the commands do, loaded when one of them runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./events-actions.js');

/** Registers `events failed` and `events retry`. */
export function registerEventsCommands(program: Command): void {
  const events = program
    .command('events')
    .description('inspect and requeue webhook events the worker could not apply');

  events
    .command('failed')
    .description('list webhook events in the failed set, newest first (docs/worker.md)')
    .option('--limit <n>', 'how many', positiveInt, 50)
    .option('--json', 'print JSON')
    .action(async (flags) => (await actions()).eventsFailed(flags));

  events
    .command('retry [id]')
    .description('requeue a failed webhook event (by job id or event id), or every one with --all')
    .option('--all', 'requeue every failed webhook event')
    .option('--json', 'print JSON')
    .action(async (id, flags) => (await actions()).eventsRetry(id, flags));
}
