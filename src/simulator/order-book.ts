import type { SimOrder } from './sim-order.js';

/**
 * Every order of the current run, indexed by invoice number (unique over all members) and by
 * partner_ref within each member (the idempotency key of spec §4 rule 2).
 */
export class OrderBook {
  private readonly byInvoice = new Map<string, SimOrder>();
  private readonly byMemberRef = new Map<string, Map<string, SimOrder>>();

  /** All orders, oldest first. */
  all(): IterableIterator<SimOrder> {
    return this.byInvoice.values();
  }

  findByPartnerRef(memberId: string, partnerRef: string): SimOrder | undefined {
    return this.byMemberRef.get(memberId)?.get(partnerRef);
  }

  /** GET /orders/:ref: the member's order with that partner_ref, else with that invoice number. */
  findForMember(memberId: string, ref: string): SimOrder | undefined {
    const byRef = this.findByPartnerRef(memberId, ref);
    if (byRef) return byRef;
    const byInvoice = this.byInvoice.get(ref);
    return byInvoice?.member.member_id === memberId ? byInvoice : undefined;
  }

  /** The control API: an order by invoice number, else by partner_ref of any member (first member wins). */
  findAny(ref: string): SimOrder | undefined {
    const byInvoice = this.byInvoice.get(ref);
    if (byInvoice) return byInvoice;
    for (const orders of this.byMemberRef.values()) {
      const order = orders.get(ref);
      if (order) return order;
    }
    return undefined;
  }

  insert(order: SimOrder): void {
    this.byInvoice.set(order.invoice_number, order);
    let memberOrders = this.byMemberRef.get(order.member.member_id);
    if (!memberOrders) {
      memberOrders = new Map();
      this.byMemberRef.set(order.member.member_id, memberOrders);
    }
    memberOrders.set(order.partner_ref, order);
  }

  /** Orders by status, and how many drew a stuck timeline. */
  stats(): { total: number; stuck: number; by_status: Record<string, number> } {
    const byStatus: Record<string, number> = {};
    let stuck = 0;
    for (const order of this.byInvoice.values()) {
      byStatus[order.status] = (byStatus[order.status] ?? 0) + 1;
      if (order.timeline?.stuck) stuck += 1;
    }
    return { total: this.byInvoice.size, stuck, by_status: byStatus };
  }

  clear(): void {
    this.byInvoice.clear();
    this.byMemberRef.clear();
  }
}
