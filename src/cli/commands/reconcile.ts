import type { Command } from 'commander';

/** What the command does, loaded when it runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./reconcile-actions.js');

/** Registers `reconcile --once`. */
export function registerReconcileCommand(program: Command): void {
  program
    .command('reconcile')
    .description('poll due orders now: one reconciliation pass in this process (docs/reconciler.md)')
    .requiredOption('--once', 'run one pass and exit (the scheduled passes run in `h2h-sync worker`)')
    .option('--upstream <name>', 'the upstream whose orders to poll (docs/upstreams.md)', 'default')
    .option('--json', 'print the pass summary as JSON')
    .action(async (flags) => (await actions()).reconcile(flags));
}
