import type { ProductTarget } from '../upstream/model.js';

/**
 * The public representations of the local catalog and the balance (docs/api.md, "Catalog and
 * balance"): what GET /v1/categories, /v1/products and /v1/balance answer and what the
 * `product.price_changed` and `balance.low` events carry. snake_case, the upstream's field names.
 */

/** A category as the last catalog sync read it. */
export interface PublicCategory {
  code: string;
  name: string;
  sub_name: string;
  logo: string;
  is_active: boolean;
}

/** A product as the last catalog sync read it; `price` is this account's. */
export interface PublicProduct {
  id: string;
  code: string;
  name: string;
  category_code: string;
  price: number;
  is_active: boolean;
  /**
   * What an order's `data` must hold (data key → regular expression), or null when the upstream
   * does not publish it (then POST /v1/orders cannot check the target and the upstream does).
   */
  target: ProductTarget | null;
}

/** One upstream's offer of a shop product (GET /v1/products, `candidates`). */
export interface PublicCandidate {
  /** The upstream's name (docs/upstreams.md). */
  upstream: string;
  /** The upstream's own code of the product: the shop's, unless the product map links another. */
  product_code: string;
  /** This account's price on that upstream. */
  price: number;
  /** Whether that upstream's last catalog sync listed it as active. */
  available: boolean;
}

/**
 * A product as the shop orders it, by its code, whatever upstream sells it (GET /v1/products).
 * With one upstream it is that upstream's product. With several, `id`, `name`, `category_code`,
 * `price` and `target` are those of the cheapest available candidate (else the cheapest), and
 * `is_active` says whether any candidate is available.
 */
export interface PublicShopProduct extends PublicProduct {
  /** Every upstream's offer, cheapest first (then by upstream name). */
  candidates: PublicCandidate[];
}

/**
 * The data of a `product.price_changed` event: one upstream's product after the sync, and its
 * price before on that upstream.
 */
export interface ProductPriceChange extends PublicProduct {
  upstream: string;
  previous_price: number;
}

/**
 * The balance (GET /v1/balance and the `balance.low` event): the last balance read from the
 * upstream's profile, corrected by what h2h-sync saw since (docs/api.md, "Balance").
 */
export interface PublicBalance {
  /** `profile_balance - debited + credited`: the best local estimate; null before the first read. */
  balance: number | null;
  /** `member_balance` of the last GET /profile; null before the first read. */
  profile_balance: number | null;
  /** When that profile was read, ISO 8601 UTC; null before the first read. */
  profile_read_at: string | null;
  /** The prices of the orders the upstream accepted since that read. */
  debited: number;
  /** The amounts of the orders that became FAILED or REFUNDED since that read. */
  credited: number;
  /** Orders accepted since that read whose price was not known (not debited). */
  unpriced_orders: number;
  /** BALANCE_LOW_THRESHOLD; null when `balance.low` is off (0). */
  low_threshold: number | null;
}

/** One upstream's balance (in GET /v1/balance's `upstreams`, the `balance.low` event, a sync's summary). */
export interface PublicUpstreamBalance extends PublicBalance {
  /** The upstream's name (docs/upstreams.md). */
  upstream: string;
}

/**
 * GET /v1/balance: the fields of {@link PublicBalance} over every upstream (the sums; `balance`
 * null until some upstream's profile was read; `profile_read_at` the oldest read, how stale the
 * sum may be), and each upstream's own. With one upstream the sums are its figures.
 */
export interface PublicBalanceTotal extends PublicBalance {
  /** Each upstream whose profile was read, the default first, then by name. */
  upstreams: PublicUpstreamBalance[];
}

/**
 * One upstream's balance drift (docs/api.md, "Balance drift"): its last profile read against the
 * balance h2h-sync expected. The data of the `balance.drift` event; `status` and `upstreams` show
 * it too.
 */
export interface PublicBalanceDrift {
  /** The upstream's name (docs/upstreams.md). */
  upstream: string;
  /** `member_balance` of its last GET /profile. */
  profile_balance: number;
  /** What h2h-sync expected then: the previous expected balance plus what it accounted since. */
  expected_balance: number;
  /** `profile_balance - expected_balance`: above 0, money came back that h2h-sync did not learn; below, a debit it did not learn. */
  drift: number;
  /** Of `drift`, what no open order explains (a negative drift up to the prices of the creates in doubt is explained). */
  unexplained_drift: number;
  /** The prices of the orders whose create was in doubt at the read. */
  in_doubt: number;
  /** When that profile was read, ISO 8601 UTC. */
  read_at: string;
  /** When the drift episode began (the first read past the threshold), ISO 8601 UTC; null when there is none. */
  drift_since: string | null;
  /** BALANCE_DRIFT_THRESHOLD; null when off (0). */
  threshold: number | null;
  /** Whether the audit reads this upstream's most recent final SUCCESS orders first, to explain the drift. */
  audit_steered: boolean;
}
