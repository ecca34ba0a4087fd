import { reconcilerSettings } from '../../config/config.js';
import type { PublicAttempt } from '../../domain/public-order.js';
import { placeOrder } from '../../orders/place-order.js';
import { type EarlyPollResult, pollOrderNow } from '../../reconciler/early-poll.js';
import type { LocalOrder, OrderEvent } from '../../store/local-order.js';
import { withClaims } from '../../store/order-store.js';
import { DEFAULT_UPSTREAM } from '../../upstream/model.js';
import { openContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { type Column, printResult, renderTable, runAction } from '../output.js';

const orderColumns: Column<LocalOrder>[] = [
  { header: 'Partner ref', cell: (o) => o.partnerRef },
  { header: 'Invoice', cell: (o) => o.invoiceNumber },
  { header: 'Product', cell: (o) => o.productCode ?? o.productId },
  { header: 'Target', cell: (o) => o.target },
  { header: 'Amount', cell: (o) => o.amount?.toLocaleString('en-US') },
  { header: 'Status', cell: (o) => o.upstreamStatus ?? o.status },
  {
    header: 'Submission',
    cell: (o) =>
      o.rejectionCode
        ? `rejected: ${o.rejectionCode}`
        : o.cancelCode
          ? `cancelled: ${o.cancelCode}`
          : o.blockedCode
            ? `blocked: ${o.blockedCode}`
            : o.submissionState,
  },
  { header: 'Serial', cell: (o) => o.serialNumber },
];

/** An order's attempts (docs/upstreams.md), as the shop sees them. */
const attemptColumns: Column<PublicAttempt>[] = [
  { header: '#', cell: (a) => a.attempt },
  { header: 'Upstream', cell: (a) => a.upstream },
  { header: 'Partner ref', cell: (a) => a.partner_ref },
  { header: 'Invoice', cell: (a) => a.invoice_number },
  { header: 'Status', cell: (a) => a.status ?? a.submission },
  { header: 'Chosen because', cell: (a) => a.chosen },
  { header: 'Ended', cell: (a) => (a.ended ? `${a.ended.code}: ${a.ended.detail}` : null) },
];

const eventColumns: Column<OrderEvent>[] = [
  { header: 'Received', cell: (e) => new Date(e.receivedAt).toISOString() },
  { header: 'Source', cell: (e) => e.source },
  { header: 'Status', cell: (e) => e.status },
  { header: 'Changed', cell: (e) => (e.changed ? 'yes' : 'no') },
  { header: 'Reason', cell: (e) => e.reason },
  { header: 'Event id', cell: (e) => e.eventId },
];

/** One event of an order's audit trail under `--json`: snake_case and ISO times, like the order (docs/api.md). */
function publicEvent(event: OrderEvent) {
  return {
    id: event.id,
    source: event.source,
    event_id: event.eventId,
    status: event.status,
    changed: event.changed,
    reason: event.reason,
    received_at: new Date(event.receivedAt).toISOString(),
    applied_at: new Date(event.appliedAt).toISOString(),
    payload: event.payload,
  };
}

/** What `order show --refresh` did, for the note under the tables and `--json`. */
interface RefreshReport {
  result: EarlyPollResult['kind'];
  /** The upstream answered and the answer went through the store (or another poller's is on its way). */
  refreshed: boolean;
  changed?: boolean;
  note: string;
  error?: { code: string; message: string; fix?: string };
}

function refreshReport(result: EarlyPollResult): RefreshReport {
  switch (result.kind) {
    case 'polled':
      return {
        result: result.kind,
        refreshed: true,
        changed: result.changed,
        note: result.changed
          ? 'refreshed: the upstream had news (a webhook was lost or late)'
          : 'refreshed: no change',
      };
    case 'busy':
      return {
        result: result.kind,
        refreshed: true,
        note: 'being polled by the reconciler right now; shown as stored',
      };
    case 'unknown_order':
      return { result: result.kind, refreshed: true, note: 'the upstream has no such order' };
    case 'other_upstream':
      return {
        result: result.kind,
        refreshed: false,
        note: `placed on upstream ${result.order.upstream}, which this command does not call; shown as stored`,
      };
    case 'kept':
      return {
        result: result.kind,
        refreshed: false,
        error: result.error,
        note:
          result.reason === 'budget'
            ? `not refreshed: the poll share of the rate budget is spent (a slot frees in ${Math.ceil((result.retryAfterMs ?? 0) / 1000)} s); shown as stored`
            : `not refreshed: ${result.error.message}; shown as stored`,
      };
  }
}

interface CreateFlags {
  product?: string;
  productId?: string;
  userId?: string;
  serverId?: string;
  data: Record<string, string>;
  partnerRef?: string;
  callbackUrl?: string;
  json?: boolean;
}

/** `order create`: places an order, at most once per partner_ref (docs/cli.md, "Placing orders"). */
export const orderCreate = async (flags: CreateFlags) => {
  await runAction(Boolean(flags.json), async () => {
    const data = {
      ...flags.data,
      ...(flags.userId ? { user_id: flags.userId } : {}),
      ...(flags.serverId ? { server_id: flags.serverId } : {}),
    };
    const context = await openContext({ upstream: true, store: 'create' });
    try {
      const result = await placeOrder(
        { client: context.upstream!.client, store: context.store!, logger: context.logger },
        {
          productCode: flags.product,
          productId: flags.productId,
          data,
          partnerRef: flags.partnerRef,
          callbackUrl: flags.callbackUrl,
        },
      );
      if (flags.json) {
        const order = await context.store!.queries.getPublicOrderByPartnerRef(result.order.partnerRef);
        process.stdout.write(`${JSON.stringify({ ...result, order }, null, 2)}\n`);
      } else {
        process.stdout.write(`${renderTable([result.order], orderColumns)}\n`);
        if (result.outcome === 'rejected')
          process.stderr.write(`rejected: ${result.code} (${result.detail}) — ${result.fix}\n`);
        if (result.outcome === 'blocked') {
          process.stderr.write(
            `blocked: the upstream refused our configuration, not the order: ${result.code} (${result.detail}) — ${result.fix}. ` +
              'It is submitted again with the same partner_ref once the configuration is fixed ' +
              '(the reconciler probes it; or run this command again)\n',
          );
        }
        if (result.outcome === 'unknown' && result.cause === 'base_url') {
          process.stderr.write(
            `not submitted: ${result.fix}; the reconciler submits it again with the same partner_ref once fixed\n`,
          );
        } else if (result.outcome === 'unknown') {
          process.stderr.write(
            `outcome unknown (${result.reason}); the reconciler will resolve it with the same partner_ref\n`,
          );
        }
      }
      if (result.outcome === 'rejected') process.exitCode = EXIT.failed;
      if (result.outcome === 'blocked') process.exitCode = EXIT.config;
      if (result.outcome === 'unknown') {
        process.exitCode = result.cause === 'base_url' ? EXIT.config : EXIT.unknownOutcome;
      }
    } finally {
      await context.close();
    }
  });
};

/** `order show REF [--refresh]`: the local order and its events. */
export const orderShow = async (ref: string, flags: { refresh?: boolean; json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      let refresh: RefreshReport | undefined;
      if (flags.refresh) {
        // With the client of the order's upstream (an order not stored yet: the default's).
        const settings = reconcilerSettings(context.config);
        const known = await context.store!.queries.getOrder(ref);
        const upstream = await context.openUpstream(known?.upstream ?? DEFAULT_UPSTREAM);
        const result = await pollOrderNow(
          { store: withClaims(context.store!, settings, upstream.name), client: upstream.client, settings },
          ref,
        );
        refresh = refreshReport(result);
        if (result.kind === 'kept' && result.reason === 'unauthorized') {
          throw Object.assign(new Error(`${result.error.message}`), { code: result.error.code });
        }
      }
      const found = await context.store!.queries.getOrder(ref);
      if (!found) {
        throw Object.assign(
          new Error(
            `no local order with partner_ref or invoice ${ref}${refresh ? ', and the upstream has none either' : ''}`,
          ),
          { code: 'NOT_FOUND' },
        );
      }
      const events = await context.store!.queries.listEvents(found.partnerRef);
      const prunedAt = await context.store!.queries.historyPrunedAt(found.partnerRef);
      const historyPrunedAt = prunedAt === null ? null : new Date(prunedAt).toISOString();
      if (flags.json) {
        const order = await context.store!.queries.getPublicOrderByPartnerRef(found.partnerRef);
        const trail = events.map(publicEvent);
        process.stdout.write(
          `${JSON.stringify({ order, events: trail, history_pruned_at: historyPrunedAt, ...(refresh ? { refresh } : {}) }, null, 2)}\n`,
        );
      } else {
        process.stdout.write(`${renderTable([found], orderColumns)}\n`);
        // An order routed over several upstreams: where it went, why, and how each attempt ended.
        if (found.route !== null || found.attempt > 1) {
          const { attempts } = (await context.store!.queries.getPublicOrderByPartnerRef(found.partnerRef))!;
          process.stdout.write(`${renderTable(attempts, attemptColumns)}\n`);
        }
        process.stdout.write(`${renderTable(events, eventColumns)}\n`);
        if (historyPrunedAt !== null) {
          process.stdout.write(
            `The events and notification records before ${historyPrunedAt} were deleted by the history retention (H2H_HISTORY_RETENTION_D); the order itself is kept.\n`,
          );
        }
        if (refresh) (refresh.refreshed ? process.stdout : process.stderr).write(`${refresh.note}\n`);
      }
      if (refresh && !refresh.refreshed && refresh.result === 'kept') process.exitCode = EXIT.failed;
    } finally {
      await context.close();
    }
  });
};

/** `order cancel REF`: cancels an order that was never sent. */
export const orderCancel = async (ref: string, flags: { json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      const store = context.store!;
      const found = await store.queries.getOrder(ref);
      if (!found) {
        throw Object.assign(new Error(`no local order with partner_ref or invoice ${ref}`), {
          code: 'NOT_FOUND',
        });
      }
      const { partnerRef } = found;
      const result = await store.writer.cancelOrder(partnerRef, {
        code: 'CANCELLED',
        detail: 'cancelled with h2h-sync order cancel',
      });
      if (!result.cancelled && result.why === 'submitted') {
        throw Object.assign(
          new Error(
            `order ${partnerRef} was already sent to the upstream (submission ${result.order.submissionState}): ` +
              `it can no longer be cancelled; follow it to its outcome with h2h-sync order show ${partnerRef}`,
          ),
          { code: 'ORDER_ALREADY_SUBMITTED' },
        );
      }
      if (flags.json) {
        const order = await store.queries.getPublicOrderByPartnerRef(partnerRef);
        process.stdout.write(`${JSON.stringify(order, null, 2)}\n`);
      } else {
        process.stdout.write(`${renderTable([result.order], orderColumns)}\n`);
        process.stdout.write(
          result.cancelled
            ? `cancelled: ${partnerRef} is never sent to the upstream\n`
            : `already cancelled (${result.order.cancelCode}: ${result.order.cancelDetail}): nothing changed\n`,
        );
      }
    } finally {
      await context.close();
    }
  });
};

/** `order list`: local orders, newest first. */
export const orderList = async (flags: { status?: string; limit: number; json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      const { queries } = context.store!;
      const filter = { status: flags.status, limit: flags.limit };
      if (flags.json) {
        process.stdout.write(`${JSON.stringify(await queries.listPublicOrders(filter), null, 2)}\n`);
      } else {
        printResult(await queries.listOrders(filter), false, orderColumns);
      }
    } finally {
      await context.close();
    }
  });
};
