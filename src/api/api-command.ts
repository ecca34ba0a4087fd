import type { Command } from 'commander';

/**
 * Registers `h2h-sync api`: runs the shop API (docs/api.md) until SIGINT or SIGTERM. Every
 * setting comes from the environment (README, "Settings").
 */
export function registerApiCommand(program: Command): void {
  program
    .command('api')
    .description('run the shop API (docs/api.md): orders and the change feed over HTTP with bearer tokens')
    // The service and the CLI's error handling are loaded when it runs, never for `--help`.
    .action(async () => {
      const [{ runService }, { runApi }] = await Promise.all([
        import('../cli/output.js'),
        import('./server.js'),
      ]);
      await runService(async () => {
        await runApi();
      });
    });
}
