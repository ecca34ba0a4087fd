import type { Command } from 'commander';

/** What the command does, loaded when it runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./tail-actions.js');

/**
 * Registers `h2h-sync tail`: follows, live, every webhook a receiver queues (BullMQ's queue
 * events on Redis) and every event the store applies, from webhooks, polls and creates (the
 * store's `order_events`, read every 250 ms), like `stripe listen`. Runs until Ctrl-C.
 */
export function registerTailCommand(program: Command): void {
  program
    .command('tail')
    .description('follow webhooks received, events applied and polls live, one line each, until Ctrl-C')
    .option('--json', 'one JSON object per line')
    .action(async (flags) => (await actions()).tail(flags));
}
