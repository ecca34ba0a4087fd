import type { Command } from 'commander';
import { NotifyError } from '../../notify/notify-error.js';
import {
  failedNotifications,
  type NotificationFilter,
  parseSeq,
  parseSince,
  type ReplayRange,
  replayNotifications,
  retryFailedNotifications,
} from '../../notify/operations.js';
import type { NotifyDelivery } from '../../store/notify-deliveries.js';
import type { OrderStore } from '../../store/order-store.js';
import { openContext } from '../context.js';
import { type Column, printPublicJson, printResult, runAction } from '../output.js';
import { endpointId } from './endpoints.js';

const deliveryColumns: Column<NotifyDelivery>[] = [
  { header: 'Endpoint', cell: (d) => d.endpointId },
  { header: 'webhook-id', cell: (d) => `evt_${d.seq}` },
  { header: 'Type', cell: (d) => d.type },
  { header: 'Order', cell: (d) => d.partnerRef ?? '' },
  { header: 'Attempt', cell: (d) => d.attempt },
  { header: 'Requested', cell: (d) => new Date(d.requestedAt).toISOString() },
  { header: 'Status', cell: (d) => d.status ?? '' },
  { header: 'ms', cell: (d) => d.durationMs ?? '' },
  { header: 'Outcome', cell: (d) => d.outcome },
  { header: 'Error', cell: (d) => d.error ?? '' },
];

interface FilterFlags {
  since?: string;
  endpoint?: string;
  json?: boolean;
}

function filterOf(flags: FilterFlags): NotificationFilter {
  return {
    since: parseSince(flags.since),
    endpointId: flags.endpoint === undefined ? undefined : endpointId(flags.endpoint),
  };
}

/** Runs `use` with the store of the deployment. */
async function withStore<T>(use: (store: OrderStore) => Promise<T>): Promise<T> {
  const context = await openContext({ store: 'existing' });
  try {
    return await use(context.store!);
  } finally {
    await context.close();
  }
}

const withFilter = (command: Command) =>
  command
    .option('--since <iso>', 'only notifications since this time (ISO 8601)')
    .option('--endpoint <id>', 'only this endpoint')
    .option('--json', 'print JSON');

/** Registers `notifications history|failed|retry|replay` (docs/cli.md). */
export function registerNotificationsCommands(program: Command): void {
  const notifications = program
    .command('notifications')
    .description("the shop notifications' delivery history, and sending them again (docs/api.md)");

  withFilter(notifications.command('history'))
    .description('delivery attempts, newest first: status, time, attempt, outcome')
    .option('--limit <n>', 'how many', '50')
    .action(async (flags: FilterFlags & { limit: string }) => {
      await runAction(Boolean(flags.json), async () => {
        const context = await openContext({ store: 'existing' });
        try {
          const { since, endpointId: id } = filterOf(flags);
          const rows = await context.store!.deliveries.history({
            since,
            limit: Math.max(1, Number(flags.limit) || 50),
            ...(id === undefined ? {} : { endpointId: id }),
          });
          if (flags.json) printPublicJson(rows);
          else printResult(rows, false, deliveryColumns);
        } finally {
          await context.close();
        }
      });
    });

  withFilter(notifications.command('failed'))
    .description('notifications given up after the whole retry schedule (H2H_NOTIFY_RETRY_S)')
    .action(async (flags: FilterFlags) => {
      await runAction(Boolean(flags.json), async () => {
        const context = await openContext({ store: 'existing' });
        try {
          const failed = await failedNotifications(context.store!, filterOf(flags));
          if (flags.json) {
            printPublicJson(failed);
            return;
          }
          if (failed.length > 0) printResult(failed, false, deliveryColumns);
          process.stdout.write(`${failed.length} failed notification${failed.length === 1 ? '' : 's'}\n`);
        } finally {
          await context.close();
        }
      });
    });

  withFilter(notifications.command('retry'))
    .description('send the failed notifications again, each with a fresh retry schedule')
    .action(async (flags: FilterFlags) => {
      await runAction(Boolean(flags.json), async () => {
        const filter = filterOf(flags);
        const retried = await withStore((store) => retryFailedNotifications(store, filter));
        if (flags.json) printPublicJson({ retried });
        else process.stdout.write(`requeued ${retried} failed notification${retried === 1 ? '' : 's'}\n`);
      });
    });

  withFilter(notifications.command('replay'))
    .description(
      'send the events since --since and/or from --from-seq (to --to-seq) again (same webhook-id), delivered or not',
    )
    .option('--from-seq <n>', 'from this feed seq on (webhook-id evt_<seq>)')
    .option('--to-seq <n>', 'up to this feed seq (with --from-seq or --since)')
    .action(async (flags: FilterFlags & { fromSeq?: string; toSeq?: string }) => {
      await runAction(Boolean(flags.json), async () => {
        if (flags.since === undefined && flags.fromSeq === undefined) {
          throw new NotifyError(
            'REPLAY_RANGE_MISSING',
            'give --since ISO or --from-seq N (or both): where in the feed to start sending the events again',
          );
        }
        const filter: ReplayRange = {
          ...filterOf(flags),
          fromSeq: parseSeq(flags.fromSeq, '--from-seq'),
          toSeq: parseSeq(flags.toSeq, '--to-seq'),
        };
        const summary = await withStore((store) => replayNotifications(store, filter));
        if (flags.json) printPublicJson(summary);
        else
          process.stdout.write(
            `queued ${summary.notifications} notification${summary.notifications === 1 ? '' : 's'} of ${summary.events} event${summary.events === 1 ? '' : 's'}\n`,
          );
      });
    });
}
