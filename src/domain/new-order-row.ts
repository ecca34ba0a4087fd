import type { NewOrderRow, SubmissionState } from '../store/local-order.js';

/**
 * The blank order row every new order and every next attempt starts from (apply-plan.ts,
 * attempts.ts): one list of what a new order does not know yet.
 */

/**
 * The columns of a submission's outcome short of acceptance (a rejection, a block, a cancel, a
 * create in doubt): none on a new order, and none once the upstream has the order.
 */
export const NO_SUBMISSION_OUTCOME = {
  rejection_code: null,
  rejection_detail: null,
  blocked_code: null,
  blocked_detail: null,
  cancel_code: null,
  cancel_detail: null,
  create_in_doubt_at: null,
} as const;

/** A new order that nothing is known of yet but its reference, submission state and time. */
export function newOrderRow(
  partnerRef: string,
  upstream: string,
  now: number,
  submission: SubmissionState,
): NewOrderRow {
  return {
    partner_ref: partnerRef,
    shop_ref: partnerRef,
    upstream,
    attempt: 1,
    attempts: null,
    route: null,
    invoice_number: null,
    product_code: null,
    product_id: null,
    target_data: null,
    callback_url: null,
    request: null,
    amount: null,
    status: null,
    upstream_status: null,
    serial_number: null,
    nickname: null,
    message: null,
    target: null,
    product_name: null,
    created_at: null,
    success_at: null,
    local_created_at: now,
    updated_at: now,
    submission_state: submission,
    ...NO_SUBMISSION_OUTCOME,
    first_sent_at: null,
    last_polled_at: null,
    next_poll_at: null,
    poll_count: 0,
    stuck_at: null,
    final_at: null,
    version: 0,
  };
}
