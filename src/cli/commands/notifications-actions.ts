import { NotifyError } from '../../notify/notify-error.js';
import {
  failedNotifications,
  type NotificationFilter,
  type ResendRange,
  resendNotifications,
  retryFailedNotifications,
} from '../../notify/operations.js';
import type { NotifyDelivery } from '../../store/notify-deliveries.js';
import type { OrderStore } from '../../store/order-store.js';
import { readIsoTime } from '../../upstream/upstream-time.js';
import { openContext } from '../context.js';
import { type Column, printPublicJson, printResult, runAction } from '../output.js';
import { endpointId } from './endpoints-actions.js';

/** Reads `--since` (an ISO 8601 date-time with `Z` or an offset) as ms; throws `INVALID_SINCE`. */
export function parseSince(text: string | undefined): number {
  if (text === undefined) return 0;
  const time = readIsoTime(text);
  if (!time?.hasTime || !time.hasOffset) {
    throw new NotifyError(
      'INVALID_SINCE',
      `--since "${text}" is not an ISO 8601 time with Z or an offset (this machine's time zone is not assumed), e.g. 2026-11-25T09:00:00Z`,
    );
  }
  return time.ms;
}

/** Reads `--from-seq`/`--to-seq` (a feed sequence number, ≥ 1); throws `INVALID_SEQ`. */
export function parseSeq(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < 1) {
    throw new NotifyError(
      'INVALID_SEQ',
      `${flag} "${text}" is not a feed sequence number: give a whole number ≥ 1 (the seq of the feed, webhook-id evt_<seq>)`,
    );
  }
  return n;
}

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

/** `notifications history`: delivery attempts, newest first. */
export const notificationsHistory = async (flags: FilterFlags & { limit: string }) => {
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
};

/** `notifications failed`: those given up after the whole retry schedule. */
export const notificationsFailed = async (flags: FilterFlags) => {
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
};

/** `notifications retry`: sends the failed ones again. */
export const notificationsRetry = async (flags: FilterFlags) => {
  await runAction(Boolean(flags.json), async () => {
    const filter = filterOf(flags);
    const retried = await withStore((store) => retryFailedNotifications(store, filter));
    if (flags.json) printPublicJson({ retried });
    else process.stdout.write(`requeued ${retried} failed notification${retried === 1 ? '' : 's'}\n`);
  });
};

/** `notifications resend`: sends every event of a range of the feed again. */
export const notificationsResend = async (flags: FilterFlags & { fromSeq?: string; toSeq?: string }) => {
  await runAction(Boolean(flags.json), async () => {
    if (flags.since === undefined && flags.fromSeq === undefined) {
      throw new NotifyError(
        'RESEND_RANGE_MISSING',
        'give --since ISO or --from-seq N (or both): where in the feed to start sending the events again',
      );
    }
    const filter: ResendRange = {
      ...filterOf(flags),
      fromSeq: parseSeq(flags.fromSeq, '--from-seq'),
      toSeq: parseSeq(flags.toSeq, '--to-seq'),
    };
    const summary = await withStore((store) => resendNotifications(store, filter));
    if (flags.json) printPublicJson(summary);
    else
      process.stdout.write(
        `queued ${summary.notifications} notification${summary.notifications === 1 ? '' : 's'} of ${summary.events} event${summary.events === 1 ? '' : 's'}\n`,
      );
  });
};
