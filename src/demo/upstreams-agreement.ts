import type { PublicAttempt, PublicOrder } from '../domain/public-order.js';
import type { Order } from '../upstream/model.js';
import { describeOrder, sameState, shopHoldsLatest } from './order-views.js';

/**
 * Whether the store, every upstream and the shop agree on one order of the two-upstream demo
 * (docs/demo.md), and the run's counts: pure, over what the demo read from each side.
 */

/** One shop order of the two-upstream demo, seen by the store, each upstream and the shop. */
export interface UpstreamsDemoRow {
  /** The shop's partner_ref (attempt n is `<ref>~<n>` upstream). */
  partnerRef: string;
  /** Each attempt as the store has it, oldest first: `beta FAILED → default SUCCESS`. */
  attempts: string;
  attemptCount: number;
  /** Why each ended attempt ended (`FAILED`, `INSUFFICIENT_BALANCE` …), oldest first. */
  failovers: string[];
  /** The candidates passed over when the order was routed, with why (`beta: balance 2000 below the price 18500`). */
  passedOver: string[];
  /** The store's view: its status and the upstream of its current attempt. */
  store: string;
  /** Each upstream's view, by name: the orders its simulator holds under the order's refs (`#2 SUCCESS`), or `none`. */
  upstreams: Record<string, string>;
  /** The shop's view, as the store's: the latest version it was notified of. */
  shop: string;
  /** The store has the order in a final state. */
  final: boolean;
  /** Every attempt is on its upstream as the store says (a refused one nowhere), and no upstream holds one the store does not know. */
  storeAgreesWithUpstreams: boolean;
  /** SUCCESS (or REFUNDED) orders across every upstream. */
  successes: number;
  /** The shop holds the store's latest version of the order. */
  shopAgrees: boolean;
  /** All of the above: final, store and upstreams agree, at most one SUCCESS, the shop agrees. */
  agrees: boolean;
}

/** What the demo read about one order. */
export interface OrderViews {
  partnerRef: string;
  /** The store's public order (by the shop's ref). */
  local: PublicOrder | undefined;
  /** The candidates passed over when its current attempt was routed (`orders.route.skipped`). */
  skipped: ReadonlyArray<{ upstream: string; why: string }>;
  /** Each upstream's simulator orders, by upstream name (all of them: filtered here). */
  upstreams: ReadonlyMap<string, readonly Order[]>;
  /** The shop's copy. */
  held: PublicOrder | undefined;
}

/** Attempt n's ref of shop ref `ref` (docs/upstreams.md, "Orders and attempts"). */
function attemptOfRef(ref: string, partnerRef: string): number | null {
  if (partnerRef === ref) return 1;
  if (!partnerRef.startsWith(`${ref}~`)) return null;
  const n = Number(partnerRef.slice(ref.length + 1));
  return Number.isInteger(n) && n >= 2 ? n : null;
}

function attemptLabel(a: PublicAttempt): string {
  return `${a.upstream} ${a.status ?? a.ended?.code ?? a.submission}`;
}

/** An order's status and the upstream of its current attempt (the serial is compared, not shown: the table is wide). */
function whereItIs(order: PublicOrder | undefined): string {
  if (!order) return 'none';
  const state = order.submission === 'rejected' ? describeOrder(order) : (order.status ?? order.submission);
  return `${state} on ${order.upstream}`;
}

const SUCCEEDED: ReadonlySet<string> = new Set(['SUCCESS', 'REFUNDED']);

/** One row of the end table: the order's views side by side, and whether they agree. */
export function compareOrderViews(views: OrderViews): UpstreamsDemoRow {
  const { partnerRef, local, held } = views;
  const attempts = local?.attempts ?? [];
  const mine = new Map(
    [...views.upstreams].map(([name, orders]) => [
      name,
      orders.filter((o) => attemptOfRef(partnerRef, o.partner_ref) !== null),
    ]),
  );
  const onUpstream = (a: { upstream: string; partner_ref: string }) =>
    mine.get(a.upstream)?.find((o) => o.partner_ref === a.partner_ref);

  const attemptsAgree = attempts.every((a) => {
    const there = onUpstream(a);
    if (a.submission === 'rejected') return there === undefined;
    return there !== undefined && there.status === a.status && there.invoice_number === a.invoice_number;
  });
  const noneUnknown = [...mine].every(([upstream, orders]) =>
    orders.every((o) => attempts.some((a) => a.upstream === upstream && a.partner_ref === o.partner_ref)),
  );
  const current = attempts.at(-1);
  const currentAgrees =
    local !== undefined &&
    current !== undefined &&
    (local.submission === 'rejected' || sameState(local, onUpstream(current)));
  const successes = [...mine.values()].flat().filter((o) => SUCCEEDED.has(o.status)).length;
  const final = local?.outcome != null;
  const storeAgreesWithUpstreams = attemptsAgree && noneUnknown && currentAgrees;
  const shopAgrees = shopHoldsLatest(held, local);

  const upstreams: Record<string, string> = {};
  for (const [name, orders] of mine) {
    upstreams[name] =
      orders.length === 0
        ? 'none'
        : orders.map((o) => `#${attemptOfRef(partnerRef, o.partner_ref)} ${o.status}`).join(', ');
  }
  return {
    partnerRef,
    attempts: attempts.map(attemptLabel).join(' → ') || 'none',
    attemptCount: attempts.length,
    failovers: attempts.flatMap((a, i) => (i < attempts.length - 1 && a.ended ? [a.ended.code] : [])),
    passedOver: attempts.length === 1 ? views.skipped.map((s) => `${s.upstream}: ${s.why}`) : [],
    store: whereItIs(local),
    upstreams,
    shop: whereItIs(held),
    final,
    storeAgreesWithUpstreams,
    successes,
    shopAgrees,
    agrees: final && storeAgreesWithUpstreams && successes <= 1 && shopAgrees,
  };
}

/** The run's counts over the end table. */
export interface UpstreamsDemoTotals {
  orders: number;
  attempts: number;
  /** Failovers by the reason the attempt before ended (`FAILED`, `INSUFFICIENT_BALANCE` …). */
  failovers: Record<string, number>;
  /** Orders whose one attempt was routed past another candidate (its balance short, its circuit open …). */
  routedPast: number;
  /** SUCCESS orders by the upstream that fulfilled them. */
  deliveredBy: Record<string, number>;
  /** Orders that did not end with a SUCCESS. */
  notDelivered: number;
  /** Rows on which the store, the upstreams and the shop do not all agree. */
  disagreements: number;
}

export function totalsOf(
  rows: readonly UpstreamsDemoRow[],
  local: readonly (PublicOrder | undefined)[],
): UpstreamsDemoTotals {
  const failovers: Record<string, number> = {};
  for (const code of rows.flatMap((r) => r.failovers)) failovers[code] = (failovers[code] ?? 0) + 1;
  const deliveredBy: Record<string, number> = {};
  for (const order of local) {
    if (order?.status === 'SUCCESS') deliveredBy[order.upstream] = (deliveredBy[order.upstream] ?? 0) + 1;
  }
  return {
    orders: rows.length,
    attempts: rows.reduce((sum, r) => sum + r.attemptCount, 0),
    failovers,
    routedPast: rows.filter((r) => r.passedOver.length > 0).length,
    deliveredBy,
    notDelivered: local.filter((o) => o?.status !== 'SUCCESS').length,
    disagreements: rows.filter((r) => !r.agrees).length,
  };
}
