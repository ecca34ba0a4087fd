import type { OrderRoute, RouteCandidate } from '../domain/attempt-records.js';
import type { RoutingPolicy } from './settings.js';

/**
 * The routing of a shop order (docs/upstreams.md, "Routing"), as a pure function of what each
 * candidate upstream looks like now: which one takes the first attempt, why, and which follow
 * after a definite non-fulfilment (domain/attempts.ts).
 */

/** What the router knows of one upstream that has the shop's product. */
export interface CandidateFacts extends RouteCandidate {
  /** Whether its product is active in its last catalog. */
  isActive: boolean;
  /** Its place in the configured order (the upstreams file's `priority`, else its position). */
  priority: number;
  /** Why its circuit is open (the circuit's code), or null when it is closed. */
  circuitOpen: string | null;
  /** Its accounted balance; null while unknown (no profile read yet). */
  balance: number | null;
  /** Its learned time to a final status for the product, ms; null while not learned. */
  completionMs: number | null;
  /** About how long an order queued for it now waits for a create slot of its budget, ms. */
  queueWaitMs: number;
}

/** The routing's bounds. */
export interface RouteLimits {
  /** A candidate whose queue would hold the order longer than this is passed over (ms). */
  maxQueueWaitMs: number;
}

/** The routing's answer: the route to write on the order, or why no candidate can take it. */
export type RouteDecision =
  | { ok: true; first: RouteCandidate; route: OrderRoute }
  | { ok: false; skipped: { upstream: string; why: string }[] };

/** Why a candidate cannot take an order now, or null when it can. */
export function whyUnavailable(candidate: CandidateFacts, limits: RouteLimits): string | null {
  if (!candidate.isActive) return 'product inactive';
  if (candidate.circuitOpen !== null) return `circuit open (${candidate.circuitOpen})`;
  if (candidate.balance !== null && candidate.price !== null && candidate.balance < candidate.price) {
    return `balance ${candidate.balance} below the price ${candidate.price}`;
  }
  if (candidate.queueWaitMs > limits.maxQueueWaitMs) {
    return `its queue waits about ${Math.round(candidate.queueWaitMs / 1000)} s for its budget`;
  }
  return null;
}

const byNullableNumber = (a: number | null, b: number | null) =>
  a === null ? (b === null ? 0 : 1) : b === null ? -1 : a - b;

/** Candidates best first under `policy`; ties go to the configured order. */
function compareUnder(policy: RoutingPolicy): (a: CandidateFacts, b: CandidateFacts) => number {
  const primary = {
    cheapest: (a: CandidateFacts, b: CandidateFacts) => byNullableNumber(a.price, b.price),
    priority: () => 0,
    fastest: (a: CandidateFacts, b: CandidateFacts) => byNullableNumber(a.completionMs, b.completionMs),
  }[policy];
  return (a, b) => primary(a, b) || a.priority - b.priority;
}

function reasonFor(policy: RoutingPolicy, first: CandidateFacts, others: number): string {
  const among = others === 0 ? 'the only available candidate' : `best of ${others + 1} available candidates`;
  if (policy === 'cheapest')
    return `cheapest: price ${first.price ?? 'unknown'} on ${first.upstream} (${among})`;
  if (policy === 'fastest') {
    const time = first.completionMs === null ? 'not learned' : `${Math.round(first.completionMs / 1000)} s`;
    return `fastest: completion ${time} on ${first.upstream} (${among})`;
  }
  return `priority: ${first.upstream} first in the configured order (${among})`;
}

/**
 * Orders `candidates` by `policy` (`cheapest`: the catalog price, unknown last; `priority`: the
 * configured order; `fastest`: the learned completion time, unknown last; ties by the configured
 * order), passes over the unavailable ones ({@link whyUnavailable}), and returns the first with
 * the others as the route's `next`. When every candidate is unavailable only because its queue
 * is long (more orders than the budgets place), the shortest wait goes first: the order waits
 * least, and every budget is used. When none is available at all: each candidate's reason.
 */
export function routeOrder(
  candidates: readonly CandidateFacts[],
  policy: RoutingPolicy,
  limits: RouteLimits = { maxQueueWaitMs: Number.POSITIVE_INFINITY },
): RouteDecision {
  const skipped: { upstream: string; why: string }[] = [];
  const available: CandidateFacts[] = [];
  for (const candidate of candidates) {
    const why = whyUnavailable(candidate, limits);
    if (why === null) available.push(candidate);
    else skipped.push({ upstream: candidate.upstream, why });
  }
  if (available.length === 0) {
    const open = { maxQueueWaitMs: Number.POSITIVE_INFINITY };
    const waiting = candidates.filter((c) => whyUnavailable(c, open) === null);
    if (waiting.length === 0) return { ok: false, skipped };
    const [first, ...rest] = [...waiting].sort(
      (a, b) => a.queueWaitMs - b.queueWaitMs || compareUnder(policy)(a, b),
    ) as [CandidateFacts, ...CandidateFacts[]];
    return decided(policy, first, rest, skipped, `every queue is long: ${first.upstream}'s is the shortest`);
  }
  const [first, ...rest] = [...available].sort(compareUnder(policy)) as [CandidateFacts, ...CandidateFacts[]];
  return decided(policy, first, rest, skipped, reasonFor(policy, first, rest.length));
}

function decided(
  policy: RoutingPolicy,
  first: CandidateFacts,
  rest: CandidateFacts[],
  skipped: { upstream: string; why: string }[],
  reason: string,
): RouteDecision {
  const plain = ({ upstream, product_code, price, product_name }: CandidateFacts): RouteCandidate => ({
    upstream,
    product_code,
    price,
    ...(product_name === undefined ? {} : { product_name }),
  });
  return {
    ok: true,
    first: plain(first),
    route: {
      policy,
      reason,
      next: rest.map(plain),
      ...(skipped.length === 0 ? {} : { skipped }),
    },
  };
}

/** Where a shop order goes first, why, and where next (docs/upstreams.md, "Routing"). */
export interface RoutedOrder {
  first: RouteCandidate;
  route: OrderRoute;
}

/** Chooses each shop order's upstream among those whose catalog has its product. */
export interface OrderRouter {
  /** The upstreams it routes among, for messages. */
  readonly upstreams: readonly string[];
  /**
   * The route of an order of the shop's product `code`, or undefined when no upstream's catalog
   * lists it (the caller refuses the order as an unknown product).
   */
  route(code: string): Promise<RoutedOrder | undefined>;
}
