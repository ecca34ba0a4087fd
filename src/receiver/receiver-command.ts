import type { Command } from 'commander';

/**
 * Registers `h2h-sync receiver`: runs the webhook receiver (docs/receiver.md) until SIGINT or
 * SIGTERM. Every setting comes from the environment (README, "Settings").
 */
export function registerReceiverCommand(program: Command): void {
  program
    .command('receiver')
    .description('run the webhook receiver (docs/receiver.md); settings from the environment')
    // The service and the CLI's error handling are loaded when it runs, never for `--help`.
    .action(async () => {
      const [{ runService }, { runReceiver }] = await Promise.all([
        import('../cli/output.js'),
        import('./server.js'),
      ]);
      await runService(async () => {
        await runReceiver();
      });
    });
}
