#!/usr/bin/env node
import { Command } from 'commander';
import { registerDemoCommand } from '../demo/demo-command.js';
import { registerReceiverCommand } from '../receiver/receiver-command.js';
import { registerSimCommand } from '../simulator/sim-command.js';
import { registerWorkerCommand } from '../worker/worker-command.js';
import { registerCatalogCommands } from './commands/catalog.js';
import { registerEventsCommands } from './commands/events.js';
import { registerOrderCommands } from './commands/order.js';
import { registerReconcileCommand } from './commands/reconcile.js';
import { registerStatusCommand } from './commands/status.js';

const program = new Command('h2h-sync')
  .description('Reseller-side sync for the upstream H2H top-up API')
  .showHelpAfterError()
  .configureHelp({ sortSubcommands: true });

registerCatalogCommands(program);
registerDemoCommand(program);
registerOrderCommands(program);
registerReceiverCommand(program);
registerSimCommand(program);
registerWorkerCommand(program);
registerEventsCommands(program);
registerReconcileCommand(program);
registerStatusCommand(program);

await program.parseAsync(process.argv);
