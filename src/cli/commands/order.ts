import { type Command, InvalidArgumentError } from 'commander';

function keyValue(value: string, previous: Record<string, string>): Record<string, string> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError('expected KEY=VALUE');
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number of at least 1');
  return n;
}

/** What the commands do, loaded when one of them runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./order-actions.js');

/** Registers `order create`, `order show`, `order cancel` and `order list`. */
export function registerOrderCommands(program: Command): void {
  const order = program.command('order').description('place and inspect orders');

  order
    .command('create')
    .description('place an order (at most once per partner_ref)')
    .option('--product <code>', 'product code')
    .option('--product-id <uuid>', 'product id')
    .option('--user-id <id>', 'target game user id (data.user_id)')
    .option('--server-id <id>', 'target server id (data.server_id)')
    .option('--data <key=value>', 'other target data; repeatable', keyValue, {})
    .option('--partner-ref <ref>', 'your idempotency key (default: a new sortable one)')
    .option('--callback-url <url>', 'webhook URL for this order only')
    .option('--json', 'print JSON')
    .action(async (flags) => (await actions()).orderCreate(flags));

  order
    .command('show <ref>')
    .description('show a local order (by partner_ref or invoice number) and its event history')
    .option('--refresh', 'poll the upstream for it now (takes a poll slot of the rate budget; never waits)')
    .option('--json', 'print JSON')
    .action(async (ref, flags) => (await actions()).orderShow(ref, flags));

  order
    .command('cancel <ref>')
    .description(
      'cancel an order that was never sent (queued, or blocked with nothing in doubt): it is never sent then',
    )
    .option('--json', 'print JSON')
    .action(async (ref, flags) => (await actions()).orderCancel(ref, flags));

  order
    .command('list')
    .description('list local orders, newest first')
    .option('--status <status>', 'an order status (SUCCESS …) or a submission state (rejected, unknown …)')
    .option('--limit <n>', 'how many', positiveInt, 50)
    .option('--json', 'print JSON')
    .action(async (flags) => (await actions()).orderList(flags));
}
