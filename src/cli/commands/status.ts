import type { Command } from 'commander';

/** What the command does, loaded when it runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./status-actions.js');

/** Registers `status`. */
export function registerStatusCommand(program: Command): void {
  program
    .command('status')
    .description(
      'orders by status, open and stuck orders, polls due, the reconciler circuit, queue depths and failed events',
    )
    .option('--json', 'print JSON')
    .action(async (flags) => (await actions()).status(flags));
}
