import type { Command } from 'commander';
import { runService } from '../cli/output.js';
import { runApi } from './server.js';

/**
 * Registers `h2h-sync api`: runs the shop API (docs/api.md) until SIGINT or SIGTERM. Every
 * setting comes from the environment (README, "Settings").
 */
export function registerApiCommand(program: Command): void {
  program
    .command('api')
    .description('run the shop API (docs/api.md): orders and the change feed over HTTP with bearer tokens')
    .action(() =>
      runService(async () => {
        await runApi();
      }),
    );
}
