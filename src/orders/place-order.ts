import type { Logger } from 'pino';
import { BudgetExhaustedError } from '../rate-budget/rate-budget.js';
import type { LocalOrder } from '../store/local-order.js';
import type { ClaimedOrder } from '../store/order-claims.js';
import type { ClaimingStore } from '../store/order-store.js';
import type { StartedSubmission } from '../store/order-writer.js';
import type { UpstreamClient } from '../upstream/client.js';
import { UpstreamError, UpstreamUnreachableError } from '../upstream/errors.js';
import { type OrderData, type OrderInput, partnerRefProblem } from '../upstream/model.js';
import { ClaimLostError, holdClaim } from './hold-claim.js';
import { sameOrderRequest } from './order-request.js';
import { newPartnerRef } from './partner-ref.js';

/** What a caller asks for. One of `productCode` and `productId` is required. */
export interface PlaceOrderInput {
  productCode?: string;
  productId?: string;
  /** Target data, for a game top-up `{ user_id, server_id }`. */
  data: OrderData;
  /** The idempotency key. Default: a new sortable one ({@link newPartnerRef}). */
  partnerRef?: string;
  callbackUrl?: string;
}

/**
 * Why a create call ended without a definite answer:
 * - `no_answer`: a timeout or a network error on every attempt;
 * - `upstream_error`: a 5xx or 429 after the retries, or an answer the client cannot read;
 * - `budget`: no `create` slot of the rate budget within the client's wait before the first
 *   request: nothing was sent and the order is left as it was (a queued one waits for the
 *   pump's next turn, a pending one for the reconciler's first poll);
 * - `base_url`: the upstream has no `POST /orders` there (404): H2H_BASE_URL is wrong. The order
 *   was surely not created, but the same partner_ref is submitted again once it is fixed;
 * - `refused_in_doubt`: a 4xx, but an earlier attempt of the order may have reached the upstream
 *   without a definite answer (it may even be why: INSUFFICIENT_BALANCE after its debit), so the
 *   order may exist: it is read by its partner_ref, never taken as rejected;
 * - `claimed`: another process holds the order's claim (it is sending or reading it), or this
 *   call's claim ran out before it could send again: that process settles it.
 */
export type UnknownCause =
  | 'no_answer'
  | 'upstream_error'
  | 'budget'
  | 'base_url'
  | 'refused_in_doubt'
  | 'claimed';

/**
 * How placement ended:
 * - `accepted`: the upstream has the order (created now, or earlier under the same partner_ref);
 * - `rejected`: the upstream refused the order itself (an order-specific 4xx such as
 *   INVALID_TARGET or INSUFFICIENT_BALANCE, with no earlier attempt in doubt), or answered with
 *   another order under its partner_ref (PARTNER_REF_REUSED); never retried; `code` says why;
 * - `blocked`: the upstream refused our configuration (401/403: API_KEY_MISSING,
 *   INVALID_API_KEY, IP_NOT_WHITELISTED); `fix` says what to change (H2H_API_KEY, the IP to
 *   whitelist), and the reconciler submits it again with the same partner_ref once a probe shows
 *   the configuration works (placing it again does too);
 * - `unknown`: no definite answer (`cause`); the order may exist upstream. The reconciler
 *   resolves it (reads it by partner_ref, or repeats the create with the same ref); `fix` says
 *   what, if anything, must be done first.
 */
export type PlaceOrderResult =
  | { outcome: 'accepted'; order: LocalOrder }
  | { outcome: 'rejected'; order: LocalOrder; code: string; detail: string; fix: string }
  | { outcome: 'blocked'; order: LocalOrder; code: string; detail: string; fix: string }
  | {
      outcome: 'unknown';
      order: LocalOrder;
      /** The error's message. */
      reason: string;
      /** The error's code: the upstream's (SERVICE_UNAVAILABLE …) or the client's (TIMEOUT …). */
      code: string;
      cause: UnknownCause;
      fix: string;
    };

export interface PlaceOrderDeps {
  client: UpstreamClient;
  /**
   * The store: the local order and its claim (only the claim's holder sends its create), the
   * create answer and the create outcomes go through it.
   */
  store: Pick<ClaimingStore, 'writer' | 'claims'>;
  logger?: Logger;
}

/** The caller's input is unusable before anything is written or sent. */
export class PlaceOrderInputError extends Error {
  override name = 'PlaceOrderInputError';
  constructor(
    message: string,
    /** `IDEMPOTENCY_CONFLICT`: the partner_ref already names an order with another product or data. */
    readonly code: 'INVALID_ORDER_INPUT' | 'IDEMPOTENCY_CONFLICT' = 'INVALID_ORDER_INPUT',
  ) {
    super(message);
  }
}

function upstreamInput(order: LocalOrder): OrderInput {
  return {
    ...(order.productCode ? { product_code: order.productCode } : {}),
    ...(order.productId ? { product_id: order.productId } : {}),
    partner_ref: order.partnerRef,
    data: order.data ?? {},
    ...(order.callbackUrl ? { callback_url: order.callbackUrl } : {}),
  };
}

/**
 * Places an order at most once per partner_ref: the local order is written first (submission
 * `pending`), claimed, then created upstream with that partner_ref ({@link sendClaimedOrder}). A
 * partner_ref that is already known locally is the same order only when asked for the same way
 * (`sameOrderRequest`: product code or id, data, callback URL as first sent); otherwise it throws
 * `IDEMPOTENCY_CONFLICT` and nothing is sent. The same order is never sent a second, different
 * way: an accepted or rejected one is returned as it is, a pending, unknown or blocked one is
 * submitted again with the same partner_ref (which the upstream answers with the existing order,
 * spec §4 rule 2), and one that another process holds right now is left to it (`claimed`).
 */
export async function placeOrder(deps: PlaceOrderDeps, input: PlaceOrderInput): Promise<PlaceOrderResult> {
  if (!input.productCode && !input.productId) {
    throw new PlaceOrderInputError('give a product code or a product id');
  }
  const partnerRef = input.partnerRef ?? newPartnerRef();
  const problem = partnerRefProblem(partnerRef);
  if (problem) throw new PlaceOrderInputError(problem);

  const { store } = deps;
  const { order: local, created } = await store.writer.createLocalOrder({
    partnerRef,
    productCode: input.productCode,
    productId: input.productId,
    data: input.data,
    callbackUrl: input.callbackUrl,
  });
  const request = {
    ...(input.productCode === undefined ? {} : { product_code: input.productCode }),
    ...(input.productId === undefined ? {} : { product_id: input.productId }),
    data: input.data,
    ...(input.callbackUrl === undefined ? {} : { callback_url: input.callbackUrl }),
  };
  if (!created && !sameOrderRequest(local, request)) {
    throw new PlaceOrderInputError(
      `partner_ref ${partnerRef} already names an order with another product or data: use a new partner_ref for a new order`,
      'IDEMPOTENCY_CONFLICT',
    );
  }
  if (local.submissionState === 'accepted' || local.submissionState === 'rejected') {
    return settledResult(local);
  }
  const claim = await store.claims.claimOrder(partnerRef);
  if (!claim?.claimed) return claimedElsewhere(claim?.order ?? local);
  try {
    return await sendClaimedOrder(deps, claim.order);
  } finally {
    await store.claims.releaseClaim(partnerRef, claim.order.claim).catch(() => undefined);
  }
}

/** An accepted, rejected or cancelled order, as placement reports it without sending anything. */
function settledResult(local: LocalOrder): PlaceOrderResult {
  if (local.submissionState === 'accepted') return { outcome: 'accepted', order: local };
  const cancelled = local.submissionState === 'cancelled';
  return {
    outcome: 'rejected',
    order: local,
    code: (cancelled ? local.cancelCode : local.rejectionCode) ?? 'REJECTED',
    detail: (cancelled ? local.cancelDetail : local.rejectionDetail) ?? '',
    fix: 'create a new order with a new partner_ref',
  };
}

/** The `claimed` outcome: another process holds the order (`lost`: this call's claim ran out). */
function claimedElsewhere(order: LocalOrder, lost?: ClaimLostError): PlaceOrderResult {
  return {
    outcome: 'unknown',
    order,
    reason:
      lost?.message ??
      `order ${order.partnerRef} is held by another process right now (sending or reading it)`,
    code: lost?.code ?? 'ORDER_CLAIMED',
    cause: 'claimed',
    fix: `nothing: that process settles it; see h2h-sync order show ${order.partnerRef}`,
  };
}

/**
 * Submits a claimed local order upstream with its own partner_ref, however many times it was
 * submitted before: the one create path of placement, the submission pump and the reconciler (an
 * unknown submission the upstream answers 404 for is sent again, spec §4 rule 7, with
 * `knownAbsent`; a blocked one once the configuration works). The caller holds the order's claim
 * (`claimed.claim`) and ends it afterwards; the claim is renewed while the create waits for a
 * budget slot or an answer, and nothing is sent once it may have run out (hold-claim.ts), so no
 * two processes ever have a create of one order in flight. An accepted, rejected or cancelled
 * order is returned as it is, never sent.
 *
 * The create is marked as sent before it leaves (`startSubmission`). A 4xx is a rejection only
 * when no attempt of the order may have reached the upstream without a definite answer, this
 * call's (a time-out, a reset, a 5xx) or an earlier one's (`create_in_doubt_at`, cleared by a 404
 * read: `knownAbsent`); otherwise the outcome is unknown and the reconciler reads the order by
 * its partner_ref (decisions.md, "Errors on create"). The answer itself adopts the order only if
 * it is ours (target, product, creation time: ref-reuse.ts); another order under our partner_ref
 * rejects it with PARTNER_REF_REUSED.
 */
export async function sendClaimedOrder(
  deps: PlaceOrderDeps,
  claimed: ClaimedOrder,
  { knownAbsent = false }: { knownAbsent?: boolean } = {},
): Promise<PlaceOrderResult> {
  const { store, client, logger } = deps;
  const { writer } = store;
  const { partnerRef } = claimed;
  if (claimed.submissionState === 'accepted') return { outcome: 'accepted', order: claimed };
  if (claimed.submissionState === 'rejected' || claimed.submissionState === 'cancelled') {
    return settledResult(claimed);
  }
  const { claim } = claimed;
  // Marked sent (`startSubmission`) right before the first request leaves, after any wait for a
  // budget slot: durable first, so a sender that dies after it leaves the create in doubt for the
  // next. `unanswered`: an attempt may have reached the upstream without a definite answer.
  let started: StartedSubmission | undefined;
  let unanswered = false;

  try {
    const created = await holdClaim(store.claims, claimed, (guard) =>
      client.createOrder(upstreamInput(claimed), {
        signal: guard.signal,
        beforeSend: async () => {
          guard.check();
          started ??= await writer.startSubmission(partnerRef, claim, {
            leaseMs: store.claims.settings.leaseMs,
            knownAbsent,
          });
          if (!started) throw new ClaimLostError(`the claim on order ${partnerRef} is another process's now`);
        },
        onUnanswered: () => {
          unanswered = true;
        },
      }),
    );
    const { order } = await writer.applyOrderSnapshot(created, {
      source: 'create',
      upstream: store.claims.upstream,
    });
    if (order.submissionState === 'rejected') {
      logger?.error(
        { partnerRef, code: order.rejectionCode, detail: order.rejectionDetail },
        'order rejected: the upstream answered with another order under its partner_ref',
      );
      return {
        outcome: 'rejected',
        order,
        code: order.rejectionCode ?? 'REJECTED',
        detail: order.rejectionDetail ?? '',
        fix: 'place the order again with a new partner_ref',
      };
    }
    logger?.info({ partnerRef, invoice: order.invoiceNumber, status: order.status }, 'order accepted');
    return { outcome: 'accepted', order };
  } catch (err) {
    if (started === undefined) {
      // Nothing left: the order stays as it was (queued, pending, blocked …), for this sender's
      // next turn or whoever claims it next.
      if (err instanceof ClaimLostError) return claimedElsewhere(claimed, err);
      if (!(err instanceof BudgetExhaustedError)) throw err;
      deps.logger?.warn(
        { partnerRef },
        'order not sent: no create slot of the rate budget; it is sent later',
      );
      return {
        outcome: 'unknown',
        order: claimed,
        reason: err.message,
        code: err.code,
        cause: 'budget',
        fix: 'nothing: it was not sent, and is sent again with its partner_ref when a slot frees',
      };
    }
    // In doubt: an earlier create was, an attempt of this one got no definite answer, or a
    // request left and then something other than the upstream's refusal failed (the store could
    // not record a 2xx, say): the order may exist upstream.
    const refusedOrUnsent =
      err instanceof UpstreamError ||
      err instanceof UpstreamUnreachableError ||
      err instanceof BudgetExhaustedError ||
      err instanceof ClaimLostError;
    const inDoubt = started.inDoubtBefore || unanswered || !refusedOrUnsent;
    if (err instanceof ClaimLostError) {
      // Whoever claims the order next sees the create in doubt (startSubmission) and settles it.
      logger?.warn({ partnerRef, reason: err.message }, 'order create stopped: its claim ran out');
      return claimedElsewhere(started.order, err);
    }
    // A 4xx about the order is a definite refusal (spec §7 rule 1), unless an attempt may have
    // created the order (decisions.md, "Errors on create"). A refusal about our own
    // configuration blocks the order, and everything else — a timeout, a network error, a 5xx or
    // 429 after the retries, a budget that stayed spent — leaves the outcome unknown.
    if (err instanceof UpstreamError && err.configuration === 'credentials') {
      const order = await writer.markBlocked(partnerRef, err.code, err.detail, { inDoubt, claim });
      if (order.submissionState === 'accepted') return { outcome: 'accepted', order };
      logger?.error(
        { partnerRef, code: err.code, fix: err.fix },
        `order blocked: the upstream refused our configuration (${err.code}) — ${err.fix}; ` +
          'it is submitted again with the same partner_ref once a probe shows the configuration works',
      );
      return { outcome: 'blocked', order, code: err.code, detail: err.detail, fix: err.fix };
    }
    const refusal =
      err instanceof UpstreamError &&
      err.configuration === undefined &&
      err.status >= 400 &&
      err.status < 500 &&
      err.status !== 429;
    if (refusal && !inDoubt) {
      const order = await writer.markRejected(partnerRef, err.code, err.detail, { claim });
      // A webhook or poll may have proved the order exists meanwhile; the store then keeps it.
      if (order.submissionState === 'accepted') return { outcome: 'accepted', order };
      logger?.warn({ partnerRef, code: err.code }, 'order rejected');
      return { outcome: 'rejected', order, code: err.code, detail: err.detail, fix: err.fix };
    }
    const order = await writer.markSubmissionUnknown(partnerRef, {
      inDoubt,
      claim,
      ...(refusal ? { refusal: { code: err.code, detail: err.detail } } : {}),
    });
    if (order.submissionState === 'accepted') return { outcome: 'accepted', order };
    const reason = err instanceof Error ? err.message : String(err);
    const cause = refusal ? 'refused_in_doubt' : unknownCause(err);
    const fix =
      cause === 'base_url'
        ? (err as UpstreamError).fix
        : 'nothing: the reconciler reads the order by its partner_ref, or submits it again with the same one';
    logger?.[cause === 'base_url' ? 'error' : 'warn'](
      { partnerRef, cause, reason },
      cause === 'base_url'
        ? `order submission outcome unknown: ${fix}; it is submitted again with the same partner_ref once fixed`
        : cause === 'refused_in_doubt'
          ? 'order refused after an attempt that may have reached the upstream: outcome unknown; the reconciler reads it'
          : 'order submission outcome unknown; the reconciler will resolve it',
    );
    const code = (err as { code?: unknown } | null)?.code;
    return { outcome: 'unknown', order, reason, code: typeof code === 'string' ? code : 'ERROR', cause, fix };
  }
}

function unknownCause(err: unknown): UnknownCause {
  if (err instanceof UpstreamError && err.configuration === 'base_url') return 'base_url';
  if (err instanceof BudgetExhaustedError) return 'budget';
  if (err instanceof UpstreamUnreachableError) return 'no_answer';
  return 'upstream_error';
}
