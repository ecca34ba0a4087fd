import type { Command } from 'commander';

/**
 * Registers `h2h-sync worker`: runs the event worker (docs/worker.md) until SIGINT or SIGTERM.
 * Every setting comes from the environment (README, "Settings").
 */
export function registerWorkerCommand(program: Command): void {
  program
    .command('worker')
    .description(
      'run the event worker (apply queued webhooks to the order store) and the reconciler (docs/worker.md, docs/reconciler.md)',
    )
    // The service and the CLI's error handling are loaded when it runs, never for `--help`.
    .action(async () => {
      const [{ runService }, { runWorker }] = await Promise.all([
        import('../cli/output.js'),
        import('./server.js'),
      ]);
      await runService(async () => {
        await runWorker();
      });
    });
}
