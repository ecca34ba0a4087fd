import type { Order, OrderData } from '../upstream/model.js';
import type { CatalogProduct } from './fixture.js';
import type { MemberState } from './members.js';
import type { Timeline } from './profile.js';

/** A refund planned by the control API: `after_days` after SUCCESS, its webhooks lost or sent. */
export interface RefundPlan {
  readonly afterMs: number;
  readonly loseWebhooks: boolean;
}

/** An order as the simulator holds it: the public fields plus what only the simulator knows. */
export interface SimOrder {
  readonly member: MemberState;
  readonly product: CatalogProduct;
  readonly invoice_number: string;
  readonly partner_ref: string;
  readonly amount: number;
  readonly target: string;
  readonly nickname: string | null;
  readonly data: OrderData;
  readonly callback_url: string | null;
  readonly created_at: string;
  status: string;
  serial_number: string | null;
  message: string | null;
  success_at: string | null;
  /**
   * POST /orders requests that named this order's partner_ref and found or created it: 1 for the
   * create, one more for each repeat (answered 200 with this order, or dropped by a fault).
   */
  create_requests: number;
  /** The timeline drawn at creation (`GET /__sim/orders/:ref/timeline`). */
  timeline?: Timeline;
  /** A refund planned by the control API, and its timer once SUCCESS has come. */
  refund_plan?: RefundPlan;
  refund_timer?: NodeJS.Timeout | undefined;
}

/** The order as POST /orders and GET /orders/:ref return it (decisions.md, "Order responses"). */
export function toPublicOrder(order: SimOrder): Order {
  return {
    invoice_number: order.invoice_number,
    partner_ref: order.partner_ref,
    status: order.status,
    amount: order.amount,
    target: order.target,
    product_name: order.product.name,
    product_code: order.product.code,
    serial_number: order.serial_number,
    nickname: order.nickname,
    message: order.message,
    created_at: order.created_at,
    success_at: order.success_at,
  };
}

/** An entry of `GET /__sim/orders`: the public order plus the simulator's own fields. */
export interface ControlOrder extends Order {
  member_id: string;
  product_id: string;
  data: OrderData;
  callback_url: string | null;
  /** {@link SimOrder.create_requests}: how many creates named this order's partner_ref. */
  create_requests: number;
}

export function toControlOrder(order: SimOrder): ControlOrder {
  return {
    ...toPublicOrder(order),
    member_id: order.member.member_id,
    product_id: order.product.id,
    data: { ...order.data },
    callback_url: order.callback_url,
    create_requests: order.create_requests,
  };
}
