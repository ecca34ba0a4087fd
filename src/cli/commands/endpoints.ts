import type { Command } from 'commander';

/** What the commands do, loaded when one of them runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./endpoints-actions.js');

/** Registers `endpoints add|list|disable|enable|rotate-secret|test` (docs/cli.md, docs/api.md "Notifications"). */
export function registerEndpointsCommands(program: Command): void {
  const endpoints = program
    .command('endpoints')
    .description("the shop's notification endpoints: signed webhooks of every order change (docs/api.md)");

  endpoints
    .command('add <url>')
    .description('add an endpoint; prints its whsec_ secret once')
    .option('--events <patterns>', "event types, comma-separated: 'order.*', 'order.updated', '*'", 'order.*')
    .option('--json', 'print JSON')
    .action(async (url, flags) => (await actions()).endpointsAdd(url, flags));

  endpoints
    .command('list')
    .description('every endpoint, enabled or not (never the secrets)')
    .option('--json', 'print JSON')
    .action(async (flags) => (await actions()).endpointsList(flags));

  endpoints
    .command('disable <id>')
    .description('stop notifying an endpoint (its queued notifications are skipped)')
    .option('--json', 'print JSON')
    .action(async (id, flags) => (await actions()).endpointsDisable(id, flags));

  endpoints
    .command('enable <id>')
    .description(
      'notify a disabled endpoint again (also one disabled by a 410), from the next event on; prints what it missed',
    )
    .option('--json', 'print JSON')
    .action(async (id, flags) => (await actions()).endpointsEnable(id, flags));

  endpoints
    .command('rotate-secret <id>')
    .description('give an endpoint a new secret; the old one signs beside it for H2H_NOTIFY_ROTATION_GRACE_H')
    .option('--json', 'print JSON')
    .action(async (id, flags) => (await actions()).endpointsRotateSecret(id, flags));

  endpoints
    .command('test <id>')
    .description(
      'send one signed endpoint.test notification now and print the answer; exits 0 on a 2xx, 1 naming the fix otherwise',
    )
    .option('--json', 'print JSON')
    .action(async (id, flags) => (await actions()).endpointsTest(id, flags));
}
