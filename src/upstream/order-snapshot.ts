/**
 * An upstream order object (a create answer, a webhook's order, a poll answer) read tolerantly:
 * the upstream may leave fields out or send them empty, and a snapshot still counts as long as
 * it has a status and names the order. A field that is missing, empty or of the wrong type reads
 * as null.
 */
export interface OrderSnapshot {
  /** Usually an `OrderStatus`; a string outside decisions.md's table is kept as received. */
  status: string;
  partner_ref: string | null;
  invoice_number: string | null;
  amount: number | null;
  target: string | null;
  product_name: string | null;
  product_code: string | null;
  serial_number: string | null;
  nickname: string | null;
  message: string | null;
  created_at: string | null;
  success_at: string | null;
}

/** The outcome of {@link readOrderSnapshot}: the snapshot, or why it can never apply. */
export type ReadOrderSnapshot = { ok: true; snapshot: OrderSnapshot } | { ok: false; problem: string };

const text = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

/**
 * Reads an upstream order object tolerantly (see {@link OrderSnapshot}); refuses only what can
 * never apply to an order: a value that is not an object, a snapshot without a status, or one
 * that names neither `partner_ref` nor `invoice_number`. Never throws.
 */
export function readOrderSnapshot(value: unknown): ReadOrderSnapshot {
  if (typeof value !== 'object' || value === null) {
    return { ok: false, problem: 'the order snapshot is not an object' };
  }
  const s = value as Record<string, unknown>;
  const status = text(s.status);
  const partnerRef = text(s.partner_ref);
  const invoiceNumber = text(s.invoice_number);
  if (status === null) return { ok: false, problem: 'the order snapshot has no status' };
  if (partnerRef === null && invoiceNumber === null) {
    return { ok: false, problem: 'the order snapshot names neither partner_ref nor invoice_number' };
  }
  return {
    ok: true,
    snapshot: {
      status,
      partner_ref: partnerRef,
      invoice_number: invoiceNumber,
      amount: typeof s.amount === 'number' && Number.isFinite(s.amount) ? s.amount : null,
      target: text(s.target),
      product_name: text(s.product_name),
      product_code: text(s.product_code),
      serial_number: text(s.serial_number),
      nickname: text(s.nickname),
      message: text(s.message),
      created_at: text(s.created_at),
      success_at: text(s.success_at),
    },
  };
}
