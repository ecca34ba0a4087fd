#!/usr/bin/env node
import { Command } from 'commander';
import { registerSimCommand } from '../simulator/sim-command.js';

const program = new Command('h2h-sync')
  .description('Reseller-side sync for the upstream H2H top-up API')
  .showHelpAfterError()
  .configureHelp({ sortSubcommands: true });

registerSimCommand(program);

await program.parseAsync(process.argv);
