import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { PublicBalance, PublicBalanceDrift } from '../../catalog/public-catalog.js';
import { budgetSettings, type Config, reconcilerSettings } from '../../config/config.js';
import { FIXED_FIRST_POLL } from '../../domain/poll-rules.js';
import { wantedTypes } from '../../notify/event-filter.js';
import { POLL_REQUEST_QUEUE } from '../../queue/poll-request-queue.js';
import { DEFAULT_QUEUE_PREFIX, WEBHOOK_QUEUE } from '../../queue/webhook-queue.js';
import { type BudgetUsage, RateBudget } from '../../rate-budget/rate-budget.js';
import { RECONCILE_QUEUE, reconcileNames } from '../../reconciler/reconcile-queue.js';
import { connectRedis } from '../../shared/redis-connection.js';
import { GAVE_UP_WINDOW } from '../../store/notify-deliveries.js';
import type { AuditCoverage, OrderCounts } from '../../store/order-queries.js';
import { type ClaimingStore, type OrderStore, withClaims } from '../../store/order-store.js';
import { EVERY_PRODUCT } from '../../store/poll-plans.js';
import type { OpenCircuit } from '../../store/upstream-circuit.js';
import { fixFor } from '../../upstream/errors.js';
import { DEFAULT_UPSTREAM, isDefaultUpstream } from '../../upstream/model.js';
import { openContext } from '../context.js';
import { printPublicJson, renderTable, runAction } from '../output.js';
import { driftText } from './drift-text.js';

const JOB_STATES = ['waiting', 'active', 'delayed', 'failed'] as const;
type JobState = (typeof JOB_STATES)[number];
type QueueDepth = Record<JobState, number>;

/**
 * The state `h2h-sync status` shows. `--json` prints it in the public form
 * (`PublicJson<StatusReport>`: snake_case, ISO times; docs/cli.md).
 */
export interface StatusReport {
  orders: OrderCounts & {
    /** Age of the oldest open order in seconds, or null when none is open. */
    oldestOpenAgeS: number | null;
  };
  /** Job counts per queue; null when Redis is unreachable (`queuesError` says why). */
  queues: { webhooks: QueueDepth; reconcile: QueueDepth; pollRequests: QueueDepth } | null;
  queuesError?: string;
  /** Webhook events in the failed set (`h2h-sync events failed`). */
  failedEvents: number | null;
  /** The default upstream's rate budget's current window, when its API key is configured and Redis answers. */
  budget: BudgetUsage | null;
  /** The default upstream's circuit: null while it may be called, else why not and the fix. */
  circuit: OpenCircuit | null;
  /**
   * Each upstream account (docs/upstreams.md), in the configuration's order, `default` first
   * when there is only one: its circuit, its budget's window (null without its key or Redis),
   * and its orders still open, due for a poll, stuck and blocked.
   */
  upstreams: UpstreamView[];
  /**
   * Orders refused for our configuration, with the newest one's code and the fix (H2H_API_KEY,
   * the IP to whitelist); null when none is blocked.
   */
  blocked: { count: number; code: string; detail: string; fix: string } | null;
  /**
   * The audit of SUCCESS orders (docs/reconciler.md, "The audit"): of the window's SUCCESS
   * orders, how many were checked with the upstream in the last day; null when it is off.
   */
  audit: (AuditCoverage & { windowDays: number; coverage: number | null }) | null;
  /**
   * When a new order of the default upstream is first polled (docs/reconciler.md, "When the
   * first poll comes"); each upstream's is in `upstreams`.
   */
  firstPoll: FirstPollView;
  /**
   * The shop notifications' backlog, per endpoint (docs/api.md, "Notifications"): events not
   * yet delivered (nor given up), the oldest one's age, those being retried, those given up.
   */
  notifications: EndpointBacklogView[];
  /**
   * The local catalog and balance the shop API answers from (docs/api.md, "Catalog and
   * balance"): when the catalog was last synced and how long ago, how many products, and the
   * balance as accounted locally since the last profile read; null values before the first sync.
   */
  catalog: {
    syncedAt: string | null;
    ageS: number | null;
    products: number;
    balance: PublicBalance;
  };
}

/**
 * When a new order of one upstream is first polled: the pace learned from its every product's
 * final webhooks (each product uses its own once it has enough), or the fixed delay while too
 * few are known, learning is off, or its reconciler has not run yet.
 */
export type FirstPollView =
  | { learned: true; quantile: number; finalS: number; deliveryS: number; samples: number }
  | { learned: false; delayS: number; reason: string };

/** One upstream's line of `h2h-sync status`. */
export interface UpstreamView {
  name: string;
  /** Its first-poll plan of every product without its own (docs/reconciler.md, "Several upstreams"). */
  firstPoll: FirstPollView;
  circuit: OpenCircuit | null;
  budget: BudgetUsage | null;
  /** Its reconcile queue's job counts (`h2h-reconcile-<name>`; the default's is `queues.reconcile`); null without Redis. */
  reconcileQueue: QueueDepth | null;
  orders: { open: number; dueForPoll: number; stuck: number; blocked: number };
  /** Its balance drift at its last profile read (docs/api.md, "Balance drift"); null before its first. */
  balanceDrift: PublicBalanceDrift | null;
}

/** Each upstream's circuit and orders, from the store (their budgets are read with Redis). */
async function upstreamViews(store: ClaimingStore, config: Config, now: number): Promise<UpstreamView[]> {
  const settings = reconcilerSettings(config);
  const views: UpstreamView[] = [];
  for (const { name } of config.upstreams) {
    const counts = await store.queries.countByStatus(now, name);
    views.push({
      name,
      circuit: await withClaims(store, settings, name).circuit.state(),
      firstPoll: await firstPoll(store, name),
      budget: null,
      reconcileQueue: null,
      orders: {
        open: counts.open,
        dueForPoll: counts.dueForPoll,
        stuck: counts.stuck,
        blocked: counts.bySubmissionState.blocked,
      },
      balanceDrift: (await store.balance.driftOf(name)) ?? null,
    });
  }
  return views;
}

/** One endpoint's line of the notification backlog in `h2h-sync status`. */
export interface EndpointBacklogView {
  endpointId: number;
  url: string;
  state: 'enabled' | 'disabled';
  disabledReason: string | null;
  /** Notifications not delivered yet (in the outbox, or not added to it yet). */
  pending: number;
  /** Of those, the ones whose last attempt failed: waiting for the next on the schedule. */
  failing: number;
  /** Events given up (`notifications failed`), counted up to a bound (`capped` past it). */
  gaveUp: number;
  capped: boolean;
  /** Age of the oldest pending notification (since its commit), seconds; null when none is pending. */
  oldestPendingAgeS: number | null;
}

/** How far behind the feed each endpoint is. */
async function notificationBacklog(store: OrderStore, now = Date.now()): Promise<EndpointBacklogView[]> {
  const views: EndpointBacklogView[] = [];
  for (const endpoint of await store.endpoints.list()) {
    // A disabled endpoint's pending are the events it is not sent: what enabling it leaves out.
    const { oldestPendingAt, pending, failing } = await store.outbox.backlog(
      endpoint,
      wantedTypes(endpoint.events),
    );
    const gaveUp = await store.deliveries.gaveUp(endpoint.id, endpoint.fromSeq);
    views.push({
      endpointId: endpoint.id,
      url: endpoint.url,
      state: endpoint.disabledAt === null ? 'enabled' : 'disabled',
      disabledReason: endpoint.disabledReason,
      pending,
      failing,
      gaveUp: gaveUp.count,
      capped: gaveUp.capped,
      oldestPendingAgeS:
        oldestPendingAt === null ? null : Math.max(0, Math.round((now - oldestPendingAt) / 1000)),
    });
  }
  return views;
}

/** "3 d 4 h", "2 h 5 min", "42 s". */
export function formatAge(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}

async function queueDepth(redis: Redis, name: string): Promise<QueueDepth> {
  const queue = new Queue(name, { connection: redis, prefix: DEFAULT_QUEUE_PREFIX });
  try {
    const counts = await queue.getJobCounts(...JOB_STATES);
    return Object.fromEntries(JOB_STATES.map((state) => [state, counts[state] ?? 0])) as QueueDepth;
  } finally {
    await queue.close().catch(() => {});
  }
}

async function queueDepths(redis: Redis): Promise<NonNullable<StatusReport['queues']>> {
  const depth = (name: string) => queueDepth(redis, name);
  const [webhooks, reconcile, pollRequests] = await Promise.all([
    depth(WEBHOOK_QUEUE),
    depth(RECONCILE_QUEUE),
    depth(POLL_REQUEST_QUEUE),
  ]);
  return { webhooks, reconcile, pollRequests };
}

async function blockedOrders(store: OrderStore, counts: OrderCounts): Promise<StatusReport['blocked']> {
  const count = counts.bySubmissionState.blocked;
  const [newest] = count > 0 ? await store.queries.listOrders({ status: 'blocked', limit: 1 }) : [];
  if (!newest) return null;
  const code = newest.blockedCode ?? 'UNAUTHORIZED';
  const detail = newest.blockedDetail ?? '';
  return { count, code, detail, fix: fixFor(code, 401, detail) };
}

async function auditCoverage(
  store: OrderStore,
  windowMs: number,
  now: number,
): Promise<StatusReport['audit']> {
  if (windowMs === 0) return null;
  const coverage = await store.queries.auditCoverage(windowMs, now);
  return {
    windowDays: windowMs / 86_400_000,
    ...coverage,
    coverage: coverage.successOrders === 0 ? null : coverage.checkedLastDay / coverage.successOrders,
  };
}

async function firstPoll(store: ClaimingStore, upstream: string): Promise<FirstPollView> {
  const { firstPollQuantile = 0, paceMinSamples } = store.claims.settings;
  // The plan every product of the upstream without its own takes (poll-plans.ts), as its
  // reconciler's last pass wrote it.
  const plan = (await store.pollPlans.ofUpstream(upstream)).get(EVERY_PRODUCT);
  if (plan && plan.samples > 0) {
    return {
      learned: true,
      quantile: firstPollQuantile,
      finalS: plan.finalMs / 1000,
      deliveryS: plan.deliveryMs / 1000,
      samples: plan.samples,
    };
  }
  const reason =
    firstPollQuantile === 0
      ? 'learning is off (RECONCILE_FIRST_POLL_QUANTILE=0)'
      : plan === undefined
        ? `no reconcile pass of ${isDefaultUpstream(upstream) ? 'it' : `upstream ${upstream}`} has run on this store yet`
        : `fewer than ${paceMinSamples} final webhooks known yet (RECONCILE_PACE_MIN_SAMPLES)`;
  return { learned: false, delayS: (plan ?? FIXED_FIRST_POLL).minMs / 1000, reason };
}

async function catalogState(store: OrderStore, now: number): Promise<StatusReport['catalog']> {
  const syncedAt = await store.catalog.syncedAt();
  return {
    syncedAt: syncedAt === null ? null : new Date(syncedAt).toISOString(),
    ageS: syncedAt === null ? null : Math.round((now - syncedAt) / 1000),
    products: (await store.catalog.products()).length,
    balance: await store.balance.view(),
  };
}

function printStatus(report: StatusReport): void {
  const { orders } = report;
  const byStatus = Object.entries(orders.byStatus).map(([status, n]) => ({ status, n }));
  const unresolved = (['queued', 'pending', 'unknown', 'blocked', 'rejected', 'cancelled'] as const)
    .filter((state) => orders.bySubmissionState[state] > 0)
    .map((state) => ({ status: `submission ${state}`, n: orders.bySubmissionState[state] }));
  const out: string[] = [];
  out.push(
    renderTable(
      [...byStatus, ...unresolved, { status: 'total', n: orders.total }],
      [
        { header: 'Status', cell: (r) => r.status },
        { header: 'Orders', cell: (r) => r.n },
      ],
    ),
  );
  out.push(
    renderTable(
      [orders],
      [
        { header: 'Open', cell: (o) => o.open },
        {
          header: 'Oldest open',
          cell: (o) => (o.oldestOpenAgeS === null ? '-' : formatAge(o.oldestOpenAgeS)),
        },
        { header: 'Due for a poll', cell: (o) => o.dueForPoll },
        { header: 'Stuck', cell: (o) => o.stuck },
      ],
    ),
  );
  if (report.queues) {
    const rows = [
      { queue: WEBHOOK_QUEUE, ...report.queues.webhooks },
      { queue: RECONCILE_QUEUE, ...report.queues.reconcile },
      ...report.upstreams
        .filter((u) => !isDefaultUpstream(u.name) && u.reconcileQueue)
        .map((u) => ({ queue: reconcileNames(u.name).queue, ...u.reconcileQueue! })),
      { queue: POLL_REQUEST_QUEUE, ...report.queues.pollRequests },
    ];
    out.push(
      renderTable(rows, [
        { header: 'Queue', cell: (r) => r.queue },
        { header: 'Waiting', cell: (r) => r.waiting },
        { header: 'Active', cell: (r) => r.active },
        { header: 'Delayed', cell: (r) => r.delayed },
        { header: 'Failed', cell: (r) => r.failed },
      ]),
    );
    out.push(
      `Failed events: ${report.failedEvents}${report.failedEvents ? ' (h2h-sync events failed lists them)' : ''}`,
    );
  } else {
    out.push(`Queues: unavailable (${report.queuesError})`);
  }
  if (report.upstreams.length > 1) {
    out.push('Upstreams:');
    out.push(
      renderTable(report.upstreams, [
        { header: 'Upstream', cell: (u) => u.name },
        { header: 'Circuit', cell: (u) => (u.circuit ? `OPEN (${u.circuit.cause})` : 'closed') },
        { header: 'Budget', cell: (u) => (u.budget ? budgetText(u.budget) : '-') },
        { header: 'Open', cell: (u) => u.orders.open },
        { header: 'Due for a poll', cell: (u) => u.orders.dueForPoll },
        { header: 'Stuck', cell: (u) => u.orders.stuck },
        { header: 'Blocked', cell: (u) => u.orders.blocked },
      ]),
    );
  } else if (report.budget) {
    out.push(`Rate budget: ${budgetText(report.budget)}`);
  }
  if (report.audit) {
    const a = report.audit;
    out.push(
      `Audit of SUCCESS orders (last ${a.windowDays} d, on idle budget): ` +
        (a.coverage === null
          ? 'none in the window'
          : `${a.checkedLastDay} of ${a.successOrders} checked in the last day (${Math.floor(a.coverage * 100)} %)`),
    );
  } else {
    out.push('Audit of SUCCESS orders: off (RECONCILE_AUDIT_WINDOW_D=0)');
  }
  if (report.upstreams.length > 1) {
    for (const u of report.upstreams) out.push(firstPollText(`First poll on ${u.name}`, u.firstPoll));
  } else {
    out.push(firstPollText('First poll', report.firstPoll));
  }
  const c = report.catalog;
  out.push(
    c.ageS === null
      ? 'Catalog: never synced (the worker syncs it at start and every CATALOG_REFRESH_S; or run `h2h-sync catalog sync`)'
      : `Catalog: ${c.products} products, synced ${formatAge(c.ageS)} ago; balance ${c.balance.balance?.toLocaleString('en-US') ?? 'unknown'}` +
          ` (profile ${c.balance.profile_balance?.toLocaleString('en-US') ?? 'unknown'}, −${c.balance.debited.toLocaleString('en-US')} +${c.balance.credited.toLocaleString('en-US')} since)`,
  );
  for (const u of report.upstreams.filter((view) => view.balanceDrift)) {
    out.push(
      driftText(
        report.upstreams.length > 1 ? `Balance drift on ${u.name}` : 'Balance drift',
        u.balanceDrift!,
      ),
    );
  }
  if (report.notifications.length > 0) {
    out.push('Shop notifications:');
    out.push(
      renderTable(report.notifications, [
        { header: 'Endpoint', cell: (e) => `${e.endpointId} ${e.url}` },
        { header: 'State', cell: (e) => (e.disabledReason ? `${e.state}: ${e.disabledReason}` : e.state) },
        { header: 'Pending', cell: (e) => e.pending },
        {
          header: 'Oldest pending',
          cell: (e) => (e.oldestPendingAgeS === null ? '-' : formatAge(e.oldestPendingAgeS)),
        },
        { header: 'Failing', cell: (e) => e.failing },
        { header: 'Given up', cell: (e) => atLeast(e, e.gaveUp) },
      ]),
    );
    if (report.notifications.some((e) => e.capped)) {
      out.push(
        `≥: given-up notifications counted up to ${GAVE_UP_WINDOW.toLocaleString('en-US')} only (status reads a bounded part of the history)`,
      );
    }
    if (report.notifications.some((e) => e.gaveUp > 0)) {
      out.push('Given-up notifications: h2h-sync notifications failed lists them, retry sends them again');
    }
    if (report.notifications.some((e) => e.state === 'disabled')) {
      out.push('A disabled endpoint is sent nothing: h2h-sync endpoints enable ID');
    }
  } else {
    out.push('Shop notifications: no endpoints (h2h-sync endpoints add URL)');
  }
  for (const { name, circuit: c } of report.upstreams) {
    if (!c) continue;
    const which = report.upstreams.length > 1 ? ` of upstream ${name}` : '';
    out.push(
      `Reconciler circuit${which} OPEN (${c.cause}) for ${formatAge((Date.now() - c.openedAt) / 1000)}: no order of it is polled or sent; ` +
        `each pass probes the upstream once (${c.probes} failed so far). ${c.code}: ${c.fix ?? c.message}`,
    );
  }
  if (report.blocked) {
    const b = report.blocked;
    out.push(
      `${b.count} blocked order(s): the upstream refused our configuration (${b.code}) — ${b.fix}. ` +
        'Each is submitted again with its partner_ref once a probe shows the configuration works.',
    );
  }
  if (orders.stuck > 0) {
    out.push(
      `${orders.stuck} stuck order(s): no final state after the maximum age; docs/reconciler.md shows how to list them`,
    );
  }
  process.stdout.write(`${out.join('\n')}\n`);
}

/** A first-poll plan in a line, after `label`. */
function firstPollText(label: string, f: FirstPollView): string {
  return f.learned
    ? `${label}: learned, p${Math.round(f.quantile * 100)} of the time to a final state ${formatAge(f.finalS)} ` +
        `+ delivery ${formatAge(f.deliveryS)} (${f.samples} samples, all products; each product uses its own once it has enough)`
    : `${label}: ${formatAge(f.delayS)} after a change, fixed: ${f.reason}`;
}

/** A budget's window in a line: "12/60 in the last 60 s (polls 3/40)". */
function budgetText(b: BudgetUsage): string {
  return (
    `${b.used}/${b.limit} in the last ${b.windowMs / 1000} s (polls ${b.poll}/${b.pollCeiling}` +
    (b.pollsWaiting ? `; polls waiting: creation leaves them ${b.pollFloor} a window)` : ')')
  );
}

/** A given-up count, "≥ n" when its read stopped at its bound (NotifyDeliveries.gaveUp). */
function atLeast(line: { capped: boolean }, figure: number | string): string | number {
  return line.capped ? `≥ ${figure}` : figure;
}

/**
 * The part of `status` the store answers, without Redis (`queues`, `failedEvents` and the budgets
 * null): what `status --json` reads of the store at `now` (bench/volume.ts times it).
 */
export async function storeStatusReport(
  store: ClaimingStore,
  config: Config,
  now: number,
): Promise<StatusReport> {
  const counts = await store.queries.countByStatus(now);
  const report: StatusReport = {
    orders: {
      ...counts,
      oldestOpenAgeS:
        counts.oldestOpenLocalCreatedAt === null
          ? null
          : Math.round((now - counts.oldestOpenLocalCreatedAt) / 1000),
    },
    queues: null,
    failedEvents: null,
    budget: null,
    circuit: await store.circuit.state(),
    upstreams: await upstreamViews(store, config, now),
    blocked: await blockedOrders(store, counts),
    audit: await auditCoverage(store, reconcilerSettings(config).auditWindowMs, now),
    firstPoll: await firstPoll(store, DEFAULT_UPSTREAM),
    notifications: await notificationBacklog(store, now),
    catalog: await catalogState(store, now),
  };
  return report;
}

/** `status`: the state of orders, polls, the circuit, the queues, the budget, the catalog and the notifications. */
export const status = async (flags: { json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      const now = Date.now();
      const report = await storeStatusReport(context.store!, context.config, now);
      // The store answers without Redis; the queue part says why it is missing.
      try {
        const redis = await connectRedis(context.config.redisUrl);
        try {
          report.queues = await queueDepths(redis);
          report.failedEvents = report.queues.webhooks.failed;
          // Each account's own budget: its key's, with its own limit.
          for (const view of report.upstreams) {
            view.reconcileQueue = await queueDepth(redis, reconcileNames(view.name).queue);
            const account = context.config.upstreams.find((u) => u.name === view.name)!;
            if (!account.apiKey) continue;
            view.budget = await new RateBudget({
              redis,
              apiKey: account.apiKey,
              ...budgetSettings(context.config, account.rateLimit),
            }).used();
          }
          report.budget = report.upstreams.find((u) => isDefaultUpstream(u.name))?.budget ?? null;
        } finally {
          redis.disconnect();
        }
      } catch (error) {
        report.queuesError = (error as Error).message;
      }
      if (flags.json) {
        printPublicJson(report);
        return;
      }
      printStatus(report);
    } finally {
      await context.close();
    }
  });
};
