import type { Logger } from 'pino';
import { BudgetExhaustedError } from '../rate-budget/rate-budget.js';
import type { LocalOrder } from '../store/local-order.js';
import type { OrderWriter } from '../store/order-writer.js';
import type { UpstreamClient } from '../upstream/client.js';
import { UpstreamError, UpstreamUnreachableError } from '../upstream/errors.js';
import { type OrderData, type OrderInput, partnerRefProblem } from '../upstream/model.js';
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
 * - `budget`: no `create` slot of the rate budget within the client's wait;
 * - `base_url`: the upstream has no `POST /orders` there (404): H2H_BASE_URL is wrong. The order
 *   was surely not created, but the same partner_ref is submitted again once it is fixed.
 */
export type UnknownCause = 'no_answer' | 'upstream_error' | 'budget' | 'base_url';

/**
 * How placement ended:
 * - `accepted`: the upstream has the order (created now, or earlier under the same partner_ref);
 * - `rejected`: the upstream refused the order itself (an order-specific 4xx such as
 *   INVALID_TARGET or INSUFFICIENT_BALANCE); never retried; `code` says why;
 * - `blocked`: the upstream refused our configuration (401/403: API_KEY_MISSING,
 *   INVALID_API_KEY, IP_NOT_WHITELISTED); the order does not exist upstream, `fix` says what to
 *   change (H2H_API_KEY, the IP to whitelist), and the reconciler submits it again with the same
 *   partner_ref once a probe shows the configuration works (placing it again does too);
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
  /** The store's writer: the local order, the create answer and the create outcomes go through it. */
  writer: OrderWriter;
  logger?: Logger;
}

/** The caller's input is unusable before anything is written or sent. */
export class PlaceOrderInputError extends Error {
  override name = 'PlaceOrderInputError';
  readonly code = 'INVALID_ORDER_INPUT';
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
 * `pending`), then created upstream with that partner_ref, and the answer goes through the
 * store's one apply function. Placing a partner_ref that is already known locally never sends a
 * second, different order: an accepted or rejected one is returned as it is, and a pending,
 * unknown or blocked one is submitted again with the same partner_ref, which the upstream answers
 * with the existing order (spec §4 rule 2).
 */
export async function placeOrder(deps: PlaceOrderDeps, input: PlaceOrderInput): Promise<PlaceOrderResult> {
  if (!input.productCode && !input.productId) {
    throw new PlaceOrderInputError('give a product code or a product id');
  }
  const partnerRef = input.partnerRef ?? newPartnerRef();
  const problem = partnerRefProblem(partnerRef);
  if (problem) throw new PlaceOrderInputError(problem);

  const { order: local } = await deps.writer.createLocalOrder({
    partnerRef,
    productCode: input.productCode,
    productId: input.productId,
    data: input.data,
    callbackUrl: input.callbackUrl,
  });
  return resubmitOrder(deps, local);
}

/**
 * Submits a local order upstream with its own partner_ref, however many times it was submitted
 * before: the one create path of placement and of the reconciler (an unknown submission the
 * upstream answers 404 for is sent again, spec §4 rule 7; a blocked one once the configuration
 * works). An accepted or rejected order is returned as it is, never sent. The upstream answers
 * a repeat with the existing order (rule 2), so this never creates a second order or a second
 * debit.
 */
export async function resubmitOrder(deps: PlaceOrderDeps, local: LocalOrder): Promise<PlaceOrderResult> {
  const { partnerRef } = local;
  if (local.submissionState === 'accepted') return { outcome: 'accepted', order: local };
  if (local.submissionState === 'rejected') {
    const code = local.rejectionCode ?? 'REJECTED';
    const detail = local.rejectionDetail ?? '';
    return {
      outcome: 'rejected',
      order: local,
      code,
      detail,
      fix: 'create a new order with a new partner_ref',
    };
  }

  try {
    const created = await deps.client.createOrder(upstreamInput(local));
    const { order } = await deps.writer.applyOrderSnapshot(created, { source: 'create' });
    deps.logger?.info({ partnerRef, invoice: order.invoiceNumber, status: order.status }, 'order accepted');
    return { outcome: 'accepted', order };
  } catch (err) {
    // A 4xx about the order is a definite refusal (spec §7 rule 1). A refusal about our own
    // configuration is not (decisions.md, "Errors on create"), and everything else — a timeout,
    // a network error, a 5xx or 429 after the retries, a budget that stayed spent — leaves the
    // outcome unknown.
    if (err instanceof UpstreamError && err.configuration === 'credentials') {
      const order = await deps.writer.markBlocked(partnerRef, err.code, err.detail);
      if (order.submissionState === 'accepted') return { outcome: 'accepted', order };
      deps.logger?.error(
        { partnerRef, code: err.code, fix: err.fix },
        `order blocked: the upstream refused our configuration (${err.code}) — ${err.fix}; ` +
          'it is submitted again with the same partner_ref once a probe shows the configuration works',
      );
      return { outcome: 'blocked', order, code: err.code, detail: err.detail, fix: err.fix };
    }
    if (
      err instanceof UpstreamError &&
      err.configuration === undefined &&
      err.status >= 400 &&
      err.status < 500 &&
      err.status !== 429
    ) {
      const order = await deps.writer.markRejected(partnerRef, err.code, err.detail);
      // A webhook or poll may have proved the order exists meanwhile; the store then keeps it.
      if (order.submissionState === 'accepted') return { outcome: 'accepted', order };
      deps.logger?.warn({ partnerRef, code: err.code }, 'order rejected');
      return { outcome: 'rejected', order, code: err.code, detail: err.detail, fix: err.fix };
    }
    const order = await deps.writer.markSubmissionUnknown(partnerRef);
    if (order.submissionState === 'accepted') return { outcome: 'accepted', order };
    const reason = err instanceof Error ? err.message : String(err);
    const cause = unknownCause(err);
    const fix =
      cause === 'base_url'
        ? (err as UpstreamError).fix
        : 'nothing: the reconciler reads the order by its partner_ref, or submits it again with the same one';
    deps.logger?.[cause === 'base_url' ? 'error' : 'warn'](
      { partnerRef, cause, reason },
      cause === 'base_url'
        ? `order submission outcome unknown: ${fix}; it is submitted again with the same partner_ref once fixed`
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
