import type { Command } from 'commander';

const withFilter = (command: Command) =>
  command
    .option('--since <iso>', 'only notifications since this time (ISO 8601)')
    .option('--endpoint <id>', 'only this endpoint')
    .option('--json', 'print JSON');

/** What the commands do, loaded when one of them runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./notifications-actions.js');

/** Registers `notifications history|failed|retry|resend` (docs/cli.md). */
export function registerNotificationsCommands(program: Command): void {
  const notifications = program
    .command('notifications')
    .description("the shop notifications' delivery history, and sending them again (docs/api.md)");

  withFilter(notifications.command('history'))
    .description('delivery attempts, newest first: status, time, attempt, outcome')
    .option('--limit <n>', 'how many', '50')
    .action(async (flags) => (await actions()).notificationsHistory(flags));

  withFilter(notifications.command('failed'))
    .description('notifications given up after the whole retry schedule (H2H_NOTIFY_RETRY_S)')
    .action(async (flags) => (await actions()).notificationsFailed(flags));

  withFilter(notifications.command('retry'))
    .description('send the failed notifications again, each with a fresh retry schedule')
    .action(async (flags) => (await actions()).notificationsRetry(flags));

  // `replay` was its name until the API's idempotent replay made the word mean two things.
  withFilter(notifications.command('resend').alias('replay'))
    .description(
      'send the events since --since and/or from --from-seq (to --to-seq) again (same webhook-id), delivered or not',
    )
    .option('--from-seq <n>', 'from this feed seq on (webhook-id evt_<seq>)')
    .option('--to-seq <n>', 'up to this feed seq (with --from-seq or --since)')
    .action(async (flags) => (await actions()).notificationsResend(flags));
}
