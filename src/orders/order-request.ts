import type { OrderData } from '../upstream/model.js';

/**
 * An order as the shop (`POST /v1/orders`) or the CLI (`order create`) asked for it, kept as sent
 * (docs/api.md, "Idempotency"): what a repeat with the same partner_ref is compared with. It holds
 * only the fields the caller gave, never what the upstream filled in later (the `product_code` of
 * an order placed by id, say), so an identical repeat always answers the same order.
 */
export interface OrderRequest {
  product_code?: string;
  product_id?: string;
  data: OrderData;
  callback_url?: string;
}

/** The request's canonical JSON: fields in one order, data keys sorted; equal requests, equal text. */
export function orderRequestJson(request: OrderRequest): string {
  const data = Object.fromEntries(
    Object.entries(request.data).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
  return JSON.stringify({
    ...(request.product_code === undefined ? {} : { product_code: request.product_code }),
    ...(request.product_id === undefined ? {} : { product_id: request.product_id }),
    data,
    ...(request.callback_url === undefined ? {} : { callback_url: request.callback_url }),
  });
}

/** A request as the store keeps it ({@link orderRequestJson}). */
export function parseOrderRequest(json: string): OrderRequest {
  return JSON.parse(json) as OrderRequest;
}

/** What a stored order holds of its request, for {@link sameOrderRequest}. */
export interface StoredRequest {
  request: OrderRequest | null;
  productCode: string | null;
  productId: string | null;
  data: OrderData | null;
  callbackUrl: string | null;
}

/**
 * Whether `incoming` asks for the same order as `stored`, which its partner_ref already names:
 * the same request as the one kept, field for field. An order written before the store kept its
 * request (`request` null) is compared on what it has: the product fields the repeat names must
 * be the stored ones, and the data and callback URL equal.
 */
export function sameOrderRequest(stored: StoredRequest, incoming: OrderRequest): boolean {
  if (stored.request !== null) return orderRequestJson(stored.request) === orderRequestJson(incoming);
  if (stored.data === null) return false;
  const named = (sent: string | undefined, kept: string | null) => sent === undefined || sent === kept;
  return (
    (incoming.product_code !== undefined || incoming.product_id !== undefined) &&
    named(incoming.product_code, stored.productCode) &&
    named(incoming.product_id, stored.productId) &&
    (incoming.callback_url ?? null) === stored.callbackUrl &&
    orderRequestJson({ data: incoming.data }) === orderRequestJson({ data: stored.data })
  );
}
