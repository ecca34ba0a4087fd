#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { registerApiCommand } from '../api/api-command.js';
import { registerDemoCommand } from '../demo/demo-command.js';
import { registerReceiverCommand } from '../receiver/receiver-command.js';
import { registerSimCommand } from '../simulator/sim-command.js';
import { registerWorkerCommand } from '../worker/worker-command.js';
import { registerCatalogCommands } from './commands/catalog.js';
import { registerEndpointsCommands } from './commands/endpoints.js';
import { registerEventsCommands } from './commands/events.js';
import { registerNotificationsCommands } from './commands/notifications.js';
import { registerOrderCommands } from './commands/order.js';
import { registerReconcileCommand } from './commands/reconcile.js';
import { registerReportCommand } from './commands/report.js';
import { registerStatusCommand } from './commands/status.js';
import { registerStoreCommands } from './commands/store.js';
import { registerTailCommand } from './commands/tail.js';
import { registerTokensCommands } from './commands/tokens.js';
import { registerUpstreamsCommand } from './commands/upstreams.js';
import { EXIT } from './exit-codes.js';

const program = new Command('h2h-sync')
  .description('Reseller-side sync for the upstream H2H top-up API')
  .showHelpAfterError()
  .configureHelp({ sortSubcommands: true })
  // A usage error (unknown command or option, a bad argument) is a configuration problem:
  // exit 2 as the README's table says, not commander's 1. Inherited by every subcommand.
  .exitOverride();

registerCatalogCommands(program);
registerDemoCommand(program);
registerOrderCommands(program);
registerReceiverCommand(program);
registerSimCommand(program);
registerWorkerCommand(program);
registerApiCommand(program);
registerTokensCommands(program);
registerEventsCommands(program);
registerEndpointsCommands(program);
registerNotificationsCommands(program);
registerReconcileCommand(program);
registerReportCommand(program);
registerStatusCommand(program);
registerStoreCommands(program);
registerTailCommand(program);
registerUpstreamsCommand(program);

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (!(error instanceof CommanderError)) throw error;
  // Commander has printed the message already; help and --version exit 0.
  process.exitCode = error.exitCode === 0 ? EXIT.ok : EXIT.config;
}
