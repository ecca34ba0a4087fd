/**
 * What an order keeps of its routing and its attempts (`orders.route`, `orders.attempts`: JSON),
 * and how to read it back. A leaf: the row types and the attempts' rules (attempts.ts) import it.
 */

/** What one routing candidate is: an upstream and that upstream's product for the shop's one. */
export interface RouteCandidate {
  upstream: string;
  /** The upstream's own code of the product (the mapping may link differing codes). */
  product_code: string;
  /** Its catalog price; null when its catalog has none. */
  price: number | null;
  product_name?: string | null;
}

/** The routing's decision kept on an order (`orders.route`, JSON). */
export interface OrderRoute {
  /** The policy that ordered the candidates. */
  policy: string;
  /** Why the current attempt's upstream was chosen, for the operator and the shop. */
  reason: string;
  /** The candidates still to try, best first. */
  next: RouteCandidate[];
  /** The candidates passed over when the order was routed, each with why. */
  skipped?: { upstream: string; why: string }[];
}

/** An attempt that ended (`orders.attempts`, a JSON array, oldest first). */
export interface EndedAttempt {
  attempt: number;
  upstream: string;
  /** The partner_ref the attempt was placed under. */
  partner_ref: string;
  invoice_number: string | null;
  /** The upstream's last status of it (FAILED), or null for a create it refused. */
  status: string | null;
  /** Its submission when it ended (`rejected`, `accepted`). */
  submission: 'queued' | 'pending' | 'accepted' | 'rejected' | 'unknown' | 'blocked' | 'cancelled';
  /** Why it was chosen (the route's reason then), when it was routed. */
  chosen: string | null;
  /** Why it ended: the refusal's code (INSUFFICIENT_BALANCE …) or FAILED, and the detail. */
  ended: { code: string; detail: string };
  amount: number | null;
  /**
   * The attempt's product, by its upstream's code. Absent on attempts ended before it was
   * recorded (the settlement report then takes the shop's code).
   */
  product_code?: string | null;
  /**
   * What the balance accounting debited for the attempt (`orders.debited_amount` then; null:
   * nothing, e.g. a refused create). Absent on attempts ended before it was recorded: then
   * `amount` when it was `accepted`, the price the accounting debits at.
   */
  debited?: number | null;
  /** When the next attempt took over, ms. */
  ended_at: number;
}

export function parseRoute(json: string | null): OrderRoute | null {
  return json === null ? null : (JSON.parse(json) as OrderRoute);
}

export function parseAttempts(json: string | null): EndedAttempt[] {
  return json === null ? [] : (JSON.parse(json) as EndedAttempt[]);
}

/** Whether `ref` is the partner_ref of one of the ended attempts of an order (its `attempts`). */
export function isEndedAttempt(row: { attempts: string | null }, ref: string): boolean {
  return parseAttempts(row.attempts).some((a) => a.partner_ref === ref);
}

/** The shop ref an attempt ref `ref` would belong to (itself when it has no attempt suffix `~2`…`~9`). */
export function shopRefOf(ref: string): string {
  const match = /^(.*)~[2-9]$/su.exec(ref);
  return match ? match[1]! : ref;
}
