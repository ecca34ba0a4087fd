import type { Command } from 'commander';

/** What the command does, loaded when it runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./upstreams-actions.js');

/** Registers `upstreams`. */
export function registerUpstreamsCommand(program: Command): void {
  program
    .command('upstreams')
    .description(
      'each upstream with its circuit, balance, catalog age and rate budget use (docs/upstreams.md)',
    )
    .option('--json', 'print JSON')
    .action(async (flags) => (await actions()).upstreams(flags));
}
