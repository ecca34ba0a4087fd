import type { Command } from 'commander';
import { runService } from '../cli/output.js';
import { runWorker } from './server.js';

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
    .action(() =>
      runService(async () => {
        await runWorker();
      }),
    );
}
