import { InvalidArgumentError } from 'commander';
import { notifySettings } from '../../config/config.js';
import {
  addEndpoint,
  disableEndpoint,
  enableEndpoint,
  findEndpoint,
  rotateEndpointSecret,
} from '../../notify/operations.js';
import type { NotifyEndpoint } from '../../store/notify-endpoints.js';
import { openContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { type Column, printPublicJson, printResult, runAction } from '../output.js';

/** An endpoint as the CLI shows it: never its secrets (they are printed once, when made). */
export interface EndpointView {
  id: number;
  url: string;
  events: string[];
  state: 'enabled' | 'disabled';
  disabledReason: string | null;
  createdAt: string;
  /** Until when the previous secret still signs, when a rotation is under way. */
  rotationUntil: string | null;
  cursor: number;
}

export function endpointView(e: NotifyEndpoint, now = Date.now()): EndpointView {
  return {
    id: e.id,
    url: e.url,
    events: e.events,
    state: e.disabledAt === null ? 'enabled' : 'disabled',
    disabledReason: e.disabledReason,
    createdAt: new Date(e.createdAt).toISOString(),
    rotationUntil:
      e.previousSecretUntil !== null && e.previousSecretUntil > now
        ? new Date(e.previousSecretUntil).toISOString()
        : null,
    cursor: e.cursor,
  };
}

const endpointColumns: Column<EndpointView>[] = [
  { header: 'Id', cell: (e) => e.id },
  { header: 'URL', cell: (e) => e.url },
  { header: 'Events', cell: (e) => e.events.join(',') },
  { header: 'State', cell: (e) => (e.disabledReason ? `${e.state}: ${e.disabledReason}` : e.state) },
  { header: 'Rotation until', cell: (e) => e.rotationUntil ?? '' },
  { header: 'Cursor', cell: (e) => e.cursor },
  { header: 'Created', cell: (e) => e.createdAt },
];

/** An endpoint id argument. */
export function endpointId(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new InvalidArgumentError('expected an endpoint id (see `endpoints list`)');
  return n;
}

/** `endpoints add URL`: prints the new endpoint and its secret, once. */
export const endpointsAdd = async (url: string, flags: { events: string; json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'create' });
    try {
      const endpoint = await addEndpoint(context.store!, url, flags.events);
      if (flags.json) {
        printPublicJson({ ...endpointView(endpoint), secret: endpoint.secret });
        return;
      }
      printResult(endpointView(endpoint), false, endpointColumns);
      process.stdout.write(
        `secret: ${endpoint.secret}\nKeep it now: it is not shown again (give it to the shop to verify the webhook-signature header).\n`,
      );
    } finally {
      await context.close();
    }
  });
};

/** `endpoints list`: every endpoint, never its secret. */
export const endpointsList = async (flags: { json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      const all = (await context.store!.endpoints.list()).map((e) => endpointView(e));
      if (flags.json) printPublicJson(all);
      else if (all.length === 0)
        process.stdout.write('no endpoints: add one with `h2h-sync endpoints add URL`\n');
      else printResult(all, false, endpointColumns);
    } finally {
      await context.close();
    }
  });
};

/** `endpoints disable ID`. */
export const endpointsDisable = async (id: string, flags: { json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      const view = endpointView(await disableEndpoint(context.store!, endpointId(id)));
      if (flags.json) printPublicJson(view);
      else printResult(view, false, endpointColumns);
    } finally {
      await context.close();
    }
  });
};

/** `endpoints enable ID`: and which events it missed. */
export const endpointsEnable = async (id: string, flags: { json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      const { endpoint, changed, missed } = await enableEndpoint(context.store!, endpointId(id));
      if (flags.json) {
        printPublicJson({ ...endpointView(endpoint), changed, missed });
        return;
      }
      printResult(endpointView(endpoint), false, endpointColumns);
      if (!changed) {
        process.stdout.write(`endpoint ${endpoint.id} was enabled already: nothing changed\n`);
      } else if (missed) {
        process.stdout.write(
          `It is sent the events from seq ${endpoint.fromSeq + 1} on. Events ${missed.fromSeq} to ${missed.toSeq} ` +
            'were not sent while it was disabled; to send them (those it wants):\n' +
            `  h2h-sync notifications resend --endpoint ${endpoint.id} --from-seq ${missed.fromSeq} --to-seq ${missed.toSeq}\n`,
        );
      } else {
        process.stdout.write(`It is sent the events from seq ${endpoint.fromSeq + 1} on; it missed none.\n`);
      }
    } finally {
      await context.close();
    }
  });
};

/** `endpoints rotate-secret ID`: prints the new secret, once. */
export const endpointsRotateSecret = async (id: string, flags: { json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      const { rotationGraceMs } = notifySettings(context.config);
      const endpoint = await rotateEndpointSecret(context.store!, endpointId(id), rotationGraceMs);
      if (flags.json) {
        printPublicJson({ ...endpointView(endpoint), secret: endpoint.secret });
        return;
      }
      process.stdout.write(
        `new secret: ${endpoint.secret}\nBoth secrets sign until ${endpointView(endpoint).rotationUntil ?? 'now'}: give the new one to the shop before then.\n`,
      );
    } finally {
      await context.close();
    }
  });
};

/**
 * `endpoints test ID`: one signed `endpoint.test` notification now (src/notify/test-notification.ts),
 * the answer printed; exit 1 with the fix unless it was a 2xx. Writes nothing to the store.
 */
export const endpointsTest = async (id: string, flags: { json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      const endpoint = await findEndpoint(context.store!, endpointId(id));
      // Loaded here: the HTTP client is for this command only.
      const { sendTestNotification } = await import('../../notify/test-notification.js');
      const result = await sendTestNotification(endpoint, {
        timeoutMs: notifySettings(context.config).timeoutMs,
      });
      if (!result.ok) process.exitCode = EXIT.failed;
      if (flags.json) {
        printPublicJson(result);
        return;
      }
      const answered =
        result.status === null ? 'gave no answer' : `answered ${result.status} in ${result.durationMs} ms`;
      process.stdout.write(
        `endpoint ${result.endpointId} (${result.url}) ${answered} to ${result.type} ${result.webhookId}\n`,
      );
      if (result.state === 'disabled') {
        process.stdout.write(
          `note: endpoint ${result.endpointId} is disabled: no notification is sent to it until \`h2h-sync endpoints enable ${result.endpointId}\`\n`,
        );
      }
      const { error } = result;
      if (error) process.stderr.write(`error: ${error.code}: ${error.message}. Fix: ${error.fix}\n`);
      else process.stdout.write('ok: the endpoint accepted a notification signed with its secret\n');
    } finally {
      await context.close();
    }
  });
};
