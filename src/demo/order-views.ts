import { type PublicOrder, samePublicOrder } from '../domain/public-order.js';
import type { Order } from '../upstream/model.js';

/**
 * How the demo shows and compares an order's three views: the store's and the shop's (both the
 * public representation) and the simulator's truth.
 */

/** The store's or the shop's view of an order: both read the same public representation. */
export function describeOrder(order: PublicOrder | undefined): string {
  if (!order) return 'none';
  if (order.submission === 'rejected') return `rejected ${order.rejection?.code}`;
  if (!order.status) return `submission ${order.submission}`;
  return `${order.status}${order.serial_number ? ` ${order.serial_number}` : ''}`;
}

/** The simulator's view of an order, or the refusal it answered the create with. */
export function describeUpstream(order: Order | undefined, rejected: string | undefined): string {
  if (!order) return rejected ? `rejected ${rejected}` : 'none';
  return `${order.status}${order.serial_number ? ` ${order.serial_number}` : ''}`;
}

/**
 * The store's order (or attempt) in the simulator's state: same status, serial number, success
 * time and invoice, or refused with the same code and absent upstream.
 */
export function sameState(
  local: PublicOrder | undefined,
  upstream: Order | undefined,
  rejected?: string,
): boolean {
  if (!local) return false;
  if (!upstream)
    return rejected !== undefined && local.submission === 'rejected' && local.rejection?.code === rejected;
  return (
    local.status === upstream.status &&
    local.serial_number === upstream.serial_number &&
    local.success_at === upstream.success_at &&
    local.invoice_number === upstream.invoice_number
  );
}

/** The shop holds exactly the store's latest version: same `version`, same representation. */
export function shopHoldsLatest(shop: PublicOrder | undefined, local: PublicOrder | undefined): boolean {
  return (
    shop !== undefined &&
    local !== undefined &&
    shop.version === local.version &&
    samePublicOrder(shop, local)
  );
}
