import type { OrderRow } from '../store/local-order.js';
import { PARTNER_REF_MAX_LENGTH } from '../upstream/model.js';
import {
  type EndedAttempt,
  type OrderRoute,
  parseAttempts,
  parseRoute,
  type RouteCandidate,
} from './attempt-records.js';
import { newOrderRow } from './new-order-row.js';

export {
  type EndedAttempt,
  isEndedAttempt,
  type OrderRoute,
  type RouteCandidate,
} from './attempt-records.js';

/**
 * An order's attempts (docs/upstreams.md, "Orders and attempts"), as pure functions of its row:
 * when the order goes on to its next upstream, and what that next attempt is. The order's row is
 * always its current attempt (its `partner_ref`, `upstream`, status and claims are the attempt's,
 * so the reconciler, the pump and the webhooks treat it as any order); the earlier attempts are
 * kept on the row (`attempts`), and `shop_ref` stays the shop's reference throughout.
 */

/** The limits on failing over (`H2H_MAX_ATTEMPTS`, `H2H_FAILOVER_WITHIN_S`). */
export interface FailoverSettings {
  /** Most attempts per order, the first included. */
  maxAttempts: number;
  /** No new attempt once the order is this old (from when it was placed), ms. */
  withinMs: number;
  /**
   * The upstreams configured now: a candidate of the route no longer among them is passed over.
   * Default: every candidate is.
   */
  upstreams?: readonly string[];
}

export const DEFAULT_FAILOVER_SETTINGS: FailoverSettings = { maxAttempts: 3, withinMs: 900_000 };

/**
 * The create refusals that prove the order was not placed and another upstream may do better
 * (spec §7): the product is unknown or not allowed there, or the balance is too low. A refusal
 * is only a rejection when no earlier create of the attempt was in doubt (submission-plan.ts).
 * Never INVALID_TARGET: the target is the customer's data, another upstream would refuse it too.
 */
export const FAILOVER_REFUSALS: ReadonlySet<string> = new Set(['INVALID_PRODUCT', 'INSUFFICIENT_BALANCE']);

/** The separator of an attempt's partner_ref: attempt n (from 2) is `<shop ref>~<n>`. */
export const ATTEMPT_SEPARATOR = '~';

/**
 * Longest shop partner_ref when several upstreams are configured: attempt refs add `~<n>`
 * (n ≤ 9: {@link MAX_ATTEMPTS_LIMIT}) and must stay within the upstream's 64.
 */
export const SHOP_REF_MAX_LENGTH = PARTNER_REF_MAX_LENGTH - 3;

/** Highest H2H_MAX_ATTEMPTS: attempt numbers stay one digit. */
export const MAX_ATTEMPTS_LIMIT = 9;

/** The partner_ref of attempt `n` of the shop's order `shopRef`. */
export function attemptRef(shopRef: string, n: number): string {
  return n === 1 ? shopRef : `${shopRef}${ATTEMPT_SEPARATOR}${n}`;
}

/**
 * Why the write `current` → `next` ended the attempt as a definite non-fulfilment, or null:
 * the create was refused now with a {@link FAILOVER_REFUSALS} code, or the order became FAILED
 * now. Anything else (a time-out, an unknown outcome, PENDING, PROCESSING, another refusal) is
 * not: it is resolved on the same upstream first.
 */
export function nonFulfilment(
  current: Pick<OrderRow, 'submission_state' | 'status' | 'first_sent_at' | 'create_in_doubt_at'> | null,
  next: Pick<OrderRow, 'submission_state' | 'rejection_code' | 'rejection_detail' | 'status' | 'message'>,
): { code: string; detail: string } | null {
  if (
    next.submission_state === 'rejected' &&
    current !== null &&
    current.submission_state !== 'rejected' &&
    refusedFirstCreate(current) &&
    next.rejection_code !== null &&
    FAILOVER_REFUSALS.has(next.rejection_code)
  ) {
    return { code: next.rejection_code, detail: next.rejection_detail ?? '' };
  }
  // Not after the shop was told the order was refused or cancelled: it stays what it was told.
  if (
    next.status === 'FAILED' &&
    current?.status !== 'FAILED' &&
    current?.submission_state !== 'rejected' &&
    current?.submission_state !== 'cancelled'
  ) {
    return { code: 'FAILED', detail: next.message ?? 'the upstream ended the order FAILED' };
  }
  return null;
}

/**
 * Whether the refused create was the attempt's first (or none was recorded as sent): the send
 * that set `create_in_doubt_at` is the one that set `first_sent_at`. A create sent again (after
 * one without an answer, even once a read answered 404, which may come before the upstream
 * commits the first) may be refused *because* the first landed (its INSUFFICIENT_BALANCE after
 * the first's debit): that refusal is resolved on the same upstream, never failed over.
 */
function refusedFirstCreate(current: Pick<OrderRow, 'first_sent_at' | 'create_in_doubt_at'>): boolean {
  return current.first_sent_at === null || current.first_sent_at === current.create_in_doubt_at;
}

/** Why an order that ended an attempt does not go on to another one, or null when it does. */
export function whyNoFailover(next: OrderRow, now: number, settings: FailoverSettings): string | null {
  const route = parseRoute(next.route);
  if (route === null) return 'not routed';
  if (configuredCandidates(route, settings).length === 0) return 'no candidate left';
  if (next.attempt >= settings.maxAttempts) return `${settings.maxAttempts} attempts made (H2H_MAX_ATTEMPTS)`;
  if (now - next.local_created_at >= settings.withinMs) {
    return `placed more than ${Math.round(settings.withinMs / 1000)} s ago (H2H_FAILOVER_WITHIN_S)`;
  }
  return null;
}

/** The route's candidates still configured ({@link FailoverSettings.upstreams}), in order. */
function configuredCandidates(route: OrderRoute, settings: FailoverSettings): RouteCandidate[] {
  const { upstreams } = settings;
  return upstreams === undefined ? route.next : route.next.filter((c) => upstreams.includes(c.upstream));
}

/**
 * The order after `next` if the write `current` → `next` ended its attempt as a definite
 * non-fulfilment ({@link nonFulfilment}) and a candidate is left within the limits: attempt n+1
 * on the next candidate, queued for that upstream's submission pump under `<shop ref>~<n+1>`,
 * with nothing of the upstream's facts of the ended one (which goes to `attempts`), and no
 * claim. Null when the order stays as `next` says (its outcome then is the last attempt's).
 * `debited` is what the balance accounting debited for the ending attempt (null: nothing), kept
 * on its record for the settlement report.
 * The caller writes it in the transaction that settled the ended attempt, so an order is never
 * on two upstreams at once and never placed twice.
 */
export function planNextAttempt(
  current: OrderRow | null,
  next: OrderRow,
  now: number,
  settings: FailoverSettings,
  debited: number | null = null,
): OrderRow | null {
  const ended = nonFulfilment(current, next);
  if (ended === null || whyNoFailover(next, now, settings) !== null) return null;
  const route = parseRoute(next.route)!;
  const [candidate, ...rest] = configuredCandidates(route, settings) as [RouteCandidate, ...RouteCandidate[]];
  const attempts: EndedAttempt[] = [
    ...parseAttempts(next.attempts),
    {
      attempt: next.attempt,
      upstream: next.upstream,
      partner_ref: next.partner_ref,
      invoice_number: next.invoice_number,
      status: next.status,
      submission: next.submission_state,
      chosen: route.reason,
      ended,
      amount: next.amount,
      product_code: next.product_code,
      debited,
      ended_at: now,
    },
  ];
  const attempt = next.attempt + 1;
  // A new order on the candidate, but for what stays the shop's: its ref, request, target, time.
  return {
    ...newOrderRow(attemptRef(next.shop_ref, attempt), candidate.upstream, now, 'queued'),
    id: next.id,
    shop_ref: next.shop_ref,
    attempt,
    attempts: JSON.stringify(attempts),
    route: JSON.stringify({
      ...route,
      reason: `${ended.code} on ${next.upstream}; next candidate: ${candidate.upstream}`,
      next: rest,
    } satisfies OrderRoute),
    product_code: candidate.product_code,
    product_name: candidate.product_name ?? next.product_name,
    amount: candidate.price,
    target_data: next.target_data,
    callback_url: next.callback_url,
    request: next.request,
    local_created_at: next.local_created_at,
    version: next.version,
  };
}

/**
 * Why `ref` cannot name a shop's order when it may go on to later attempts (several upstreams),
 * or undefined: attempt refs add `~<n>`, so a shop ref has no `~` and at most
 * {@link SHOP_REF_MAX_LENGTH} characters (Unicode code points, as the upstream counts).
 */
export function shopRefProblem(ref: string): string | undefined {
  if (ref.includes(ATTEMPT_SEPARATOR)) {
    return `must not contain "${ATTEMPT_SEPARATOR}" with several upstreams (a later attempt's ref is <partner_ref>~<n>)`;
  }
  const characters = [...ref].length;
  if (characters > SHOP_REF_MAX_LENGTH) {
    return `at most ${SHOP_REF_MAX_LENGTH} characters with several upstreams (a later attempt's ref adds ~<n> within the upstream's ${PARTNER_REF_MAX_LENGTH}), got ${characters}`;
  }
  return undefined;
}
