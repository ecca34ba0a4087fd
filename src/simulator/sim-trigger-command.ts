import type { Command } from 'commander';
import { ORDER_STATUSES } from '../upstream/model.js';
import { DEFAULT_SIM_URL } from './defaults.js';

/** What the command does, loaded when it runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./sim-trigger-actions.js');

/**
 * Registers `h2h-sync sim trigger REF STATUS`: moves one simulator order to a status through the
 * control API (`POST /__sim/orders/:ref/status`), which sends its webhook, after merging any
 * `--fault` into the simulator's faults (`POST /__sim/faults`), like `stripe trigger`.
 */
export function registerSimTriggerCommand(sim: Command): void {
  sim
    .command('trigger')
    .description(
      'move a simulator order to a status (its webhook follows), optionally with faults switched on first',
    )
    .argument('<ref>', "the order's partner_ref or invoice number")
    .argument('<status>', `${ORDER_STATUSES.join(', ')}`)
    .option(
      '--fault <name[=value]>',
      'switch a fault on first (repeatable): e.g. webhook_drop, webhook_duplicate=0.5, order_read_errors=REF1,REF2, NAME=off',
      (flag: string, all: string[]) => [...all, flag],
      [] as string[],
    )
    .option('--serial <serial>', 'the serial number the order gets (SUCCESS)')
    .option('--message <message>', "the order's message instead of the default")
    .option('--sim-url <url>', `the simulator; default the origin of H2H_BASE_URL, else ${DEFAULT_SIM_URL}`)
    .option('--json', 'print JSON')
    .action(async (ref, statusArg, flags) => (await actions()).simTrigger(ref, statusArg, flags));
}
