import type { PublicShopProduct } from '../catalog/public-catalog.js';
import { targetProblem } from '../catalog/target-rules.js';
import type { PublicOrder } from '../domain/public-order.js';
import type { OrderRouter } from '../routing/route-order.js';
import type { OrderStore } from '../store/order-store.js';
import type { OrderRequest } from './order-request.js';
import { sameOrderRequest } from './order-request.js';

/** Why the shop's order was not accepted: each is one answer of the shop API (docs/api.md). */
export type AcceptRefusal =
  | 'IDEMPOTENCY_CONFLICT'
  | 'UNKNOWN_PRODUCT'
  | 'PRODUCT_INACTIVE'
  | 'INVALID_TARGET'
  | 'BACKLOG_FULL';

/** The order was not accepted; `code` says why and the message names the fix. Nothing was stored. */
export class AcceptOrderError extends Error {
  override name = 'AcceptOrderError';
  constructor(
    readonly code: AcceptRefusal,
    message: string,
  ) {
    super(message);
  }
}

export interface AcceptOrderOptions {
  /**
   * Chooses the order's upstream among those whose catalog has its product (routing/router.ts),
   * with several upstreams: the order is queued on the first with the route to go on with.
   * Without it (one upstream) every order is the default upstream's.
   */
  router?: OrderRouter;
  /** Most orders waiting in the submission queue (API_SUBMISSION_BACKLOG). */
  submissionBacklog: number;
  /** How long a full backlog asks the shop to wait, in seconds (its message says it). */
  retryAfterS: number;
}

/**
 * How the shop's order was taken: `queued` now (202), or `replayed`, the order its partner_ref
 * already names, asked for the same way (200, `Idempotent-Replayed`).
 */
export type AcceptResult = { replayed: boolean; order: PublicOrder };

/**
 * Takes a shop's order (POST /v1/orders) under `partnerRef`: the one place of its rules.
 * - A partner_ref already used is the same order only when asked for the same way, as first sent
 *   (`sameOrderRequest`: product code or id, data), whatever the order's state since: queued,
 *   accepted, final, rejected or cancelled. Another request under it is `IDEMPOTENCY_CONFLICT`.
 * - A new one is checked against the local catalog once it was synced (an unknown or inactive
 *   product, data that misses the product's published target rules) and refused before anything
 *   is stored or sent; then routed (with several upstreams: `options.router`) and queued for
 *   its upstream's submission pump, with the catalog's name and price of its product, unless `submissionBacklog` orders already wait (`BACKLOG_FULL`): counted
 *   in the insert's transaction, which admissions take one at a time, so the backlog never
 *   grows past it however many requests arrive together.
 * Two requests with one new partner_ref race on the store's unique key: one queues, the other
 * is answered as a repeat of it.
 */
export async function acceptOrder(
  store: OrderStore,
  partnerRef: string,
  request: Omit<OrderRequest, 'callback_url'>,
  options: AcceptOrderOptions,
): Promise<AcceptResult> {
  const known = await store.queries.getOrderByPartnerRef(partnerRef);
  if (known) return replay(store, partnerRef, known, request);
  const product = await checkAgainstCatalog(store, request);
  const routed = product && options.router ? await options.router.route(product.code) : undefined;
  const admitted = await store.writer.admitQueuedOrder(
    routed
      ? {
          partnerRef,
          productCode: routed.first.product_code,
          data: request.data,
          upstream: routed.first.upstream,
          route: routed.route,
          catalog: {
            name: routed.first.product_name ?? product!.name,
            price: routed.first.price ?? product!.price,
          },
          request,
        }
      : {
          partnerRef,
          ...(request.product_code === undefined ? {} : { productCode: request.product_code }),
          ...(request.product_id === undefined ? {} : { productId: request.product_id }),
          data: request.data,
          ...(product ? { catalog: { name: product.name, price: product.price } } : {}),
        },
    options.submissionBacklog,
  );
  if ('full' in admitted) {
    throw new AcceptOrderError(
      'BACKLOG_FULL',
      `${options.submissionBacklog} orders already wait for the upstream's rate budget: retry after ${options.retryAfterS} s (nothing was stored)`,
    );
  }
  // Another request with the same ref may have won the insert.
  const { created, order } = admitted;
  if (!created) return replay(store, partnerRef, order, request);
  return { replayed: false, order: (await store.queries.getPublicOrderByPartnerRef(partnerRef))! };
}

async function replay(
  store: OrderStore,
  partnerRef: string,
  known: Parameters<typeof sameOrderRequest>[0],
  request: OrderRequest,
): Promise<AcceptResult> {
  if (!sameOrderRequest(known, request)) {
    throw new AcceptOrderError(
      'IDEMPOTENCY_CONFLICT',
      `partner_ref ${partnerRef} already names an order with another product or data: use a new partner_ref for a new order`,
    );
  }
  return { replayed: true, order: (await store.queries.getPublicOrderByPartnerRef(partnerRef))! };
}

/**
 * Refuses, before anything is stored or sent, an order the local catalog knows every upstream
 * would refuse: a product no upstream's catalog lists (by its code or the product map's), one no
 * upstream has active, or target data that does not match the published rules of the candidate
 * the shop product shows (the cheapest active one); else returns the shop product, whose name and
 * price the queued order shows. A catalog never synced checks nothing and returns nothing
 * (docs/api.md).
 */
async function checkAgainstCatalog(
  store: OrderStore,
  request: OrderRequest,
): Promise<PublicShopProduct | undefined> {
  if ((await store.catalog.syncedAt()) === null) return undefined;
  const { product_code: code, product_id: id } = request;
  const named = code !== undefined ? `product_code ${code}` : `product_id ${id}`;
  const byCode = code === undefined ? undefined : await store.catalog.shopProduct({ code });
  const byId = id === undefined ? undefined : await store.catalog.shopProduct({ id });
  if (code !== undefined && id !== undefined && byCode?.code !== byId?.code) {
    throw new AcceptOrderError(
      'UNKNOWN_PRODUCT',
      `product_code ${code} and product_id ${id} name different products: send one of them (GET /v1/products lists both)`,
    );
  }
  const product = byCode ?? byId;
  if (!product) {
    throw new AcceptOrderError(
      'UNKNOWN_PRODUCT',
      `no product has ${named} in the catalog: see GET /v1/products`,
    );
  }
  if (!product.is_active) {
    throw new AcceptOrderError(
      'PRODUCT_INACTIVE',
      `${product.code} (${product.name}) is not active now: choose an active product from GET /v1/products`,
    );
  }
  const problem = targetProblem(product.target, request.data);
  if (problem) {
    throw new AcceptOrderError(
      'INVALID_TARGET',
      `${problem.message}; ${product.code} publishes its rules in GET /v1/products`,
    );
  }
  return product;
}
