import type { Command } from 'commander';
import { runService } from '../cli/output.js';
import { runReceiver } from './server.js';

/**
 * Registers `h2h-sync receiver`: runs the webhook receiver (docs/receiver.md) until SIGINT or
 * SIGTERM. Every setting comes from the environment (README, "Settings").
 */
export function registerReceiverCommand(program: Command): void {
  program
    .command('receiver')
    .description('run the webhook receiver (docs/receiver.md); settings from the environment')
    .action(() =>
      runService(async () => {
        await runReceiver();
      }),
    );
}
