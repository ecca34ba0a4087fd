import type { Command } from 'commander';

/** Registers `h2h-sync sim`. (Placeholder until the simulator lands.) */
export function registerSimCommand(program: Command): void {
  program.command('sim').description('run the upstream simulator');
}
