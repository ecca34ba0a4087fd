import type { OrderRow } from '../../src/store/local-order.js';

export const NOW = Date.UTC(2026, 10, 1, 12);

/** An accepted PROCESSING order of product ML86, created an hour before {@link NOW}, as a row. */
export function orderRow(overrides: Partial<OrderRow> = {}): OrderRow {
  return {
    id: 7,
    partner_ref: 'R1',
    upstream: 'default',
    invoice_number: 'INV-R1',
    product_code: 'ML86',
    product_id: null,
    target_data: '{"user_id":"12345678","zone_id":"2001"}',
    callback_url: null,
    request: null,
    amount: 15_000,
    status: 'PROCESSING',
    upstream_status: 'PROCESSING',
    serial_number: null,
    nickname: 'PlayerOne',
    message: null,
    target: '12345678(2001)',
    product_name: 'Mobile Legends 86 Diamonds',
    created_at: '2026-11-01T11:00:00.000Z',
    success_at: null,
    local_created_at: NOW - 3_600_000,
    updated_at: NOW - 3_600_000,
    submission_state: 'accepted',
    rejection_code: null,
    rejection_detail: null,
    blocked_code: null,
    blocked_detail: null,
    cancel_code: null,
    cancel_detail: null,
    first_sent_at: NOW - 3_600_000,
    create_in_doubt_at: null,
    last_polled_at: null,
    next_poll_at: NOW + 60_000,
    poll_count: 2,
    stuck_at: null,
    final_at: null,
    version: 3,
    ...overrides,
  };
}
