import type { OrderRow } from '../store/local-order.js';
import { parseAttempts } from './attempt-records.js';

/**
 * The settlement with each supplier (docs/settlement.md), as pure functions: every attempt of an
 * order on the day its order was placed, what the supplier's money did for it (debited when it
 * accepted the attempt, credited back when the attempt ended FAILED or REFUNDED: decisions.md,
 * "Order states"), and the tally per day, upstream and product. The figures are the balance
 * accounting's own (`orders.debited_amount`, an ended attempt's `debited`; docs/api.md,
 * "Balance"), so a supplier's totals over a range equal what its ledger counted for those orders.
 */

/** Where an attempt stands for the settlement: its final state, refused, or still open. */
export type SettlementOutcome = 'SUCCESS' | 'FAILED' | 'REFUNDED' | 'rejected' | 'open';

/** The order columns the settlement reads (`src/store/settlement-scan.ts` selects them). */
export type SettlementOrderRow = Pick<
  OrderRow,
  | 'shop_ref'
  | 'partner_ref'
  | 'upstream'
  | 'product_code'
  | 'status'
  | 'submission_state'
  | 'amount'
  | 'attempts'
  | 'request'
  | 'invoice_number'
  | 'local_created_at'
> & { debited_amount: number | null };

/** One attempt of an order on one supplier, as the settlement counts it. */
export interface SettlementAttempt {
  upstream: string;
  /** The product by that upstream's code; null when unknown. */
  productCode: string | null;
  outcome: SettlementOutcome;
  /** The upstream's status (`PENDING` …), null before it said one. */
  status: string | null;
  /** Where the create stands (`accepted`, `rejected`, `queued` …). */
  submission: string;
  /** What the supplier debited for it (null: nothing, or accepted without a known price). */
  debited: number | null;
  /** What the supplier credited back: the debit, once the attempt is FAILED or REFUNDED. */
  credited: number;
  /** Accepted by the supplier without a known price: debited, by an amount the store does not know. */
  unpriced: boolean;
  shopRef: string;
  partnerRef: string;
  invoiceNumber: string | null;
  placedAt: number;
}

const FINAL: ReadonlySet<string | null> = new Set(['SUCCESS', 'FAILED', 'REFUNDED']);
const CREDITED: ReadonlySet<string | null> = new Set(['FAILED', 'REFUNDED']);

function outcomeOf(status: string | null, submission: string): SettlementOutcome {
  if (FINAL.has(status)) return status as SettlementOutcome;
  return submission === 'rejected' ? 'rejected' : 'open';
}

/** The shop's product code of the order (its request), for an ended attempt that kept none. */
function requestedCode(row: SettlementOrderRow): string | null {
  if (row.request === null) return row.product_code;
  const request = JSON.parse(row.request) as { product_code?: string };
  return request.product_code ?? row.product_code;
}

/**
 * Every attempt of the order `row` on a supplier, oldest first: its ended attempts
 * (`orders.attempts`) and its current one. A current attempt cancelled before it was sent is no
 * supplier's and is left out.
 */
export function settlementAttempts(row: SettlementOrderRow): SettlementAttempt[] {
  // Fields listed one by one: an object spread here made the report 20 times slower (V8's slow
  // path for a spread with more properties after it), and it runs for every order of the range.
  const shopRef = row.shop_ref ?? row.partner_ref;
  const placedAt = row.local_created_at;
  const attempts = parseAttempts(row.attempts).map((a): SettlementAttempt => {
    // Attempts ended before `debited` was recorded: the accounting debits an accepted one at its amount.
    const debited = a.debited !== undefined ? a.debited : a.submission === 'accepted' ? a.amount : null;
    return {
      shopRef,
      placedAt,
      upstream: a.upstream,
      productCode: a.product_code !== undefined ? a.product_code : requestedCode(row),
      outcome: outcomeOf(a.status, a.submission),
      status: a.status,
      submission: a.submission,
      debited,
      credited: CREDITED.has(a.status) ? (debited ?? 0) : 0,
      unpriced: a.submission === 'accepted' && debited === null,
      partnerRef: a.partner_ref,
      invoiceNumber: a.invoice_number,
    };
  });
  if (row.submission_state !== 'cancelled') {
    const accepted = row.submission_state === 'accepted';
    const debited = accepted ? row.debited_amount : null;
    attempts.push({
      shopRef,
      placedAt,
      upstream: row.upstream,
      productCode: row.product_code,
      outcome: outcomeOf(row.status, row.submission_state),
      status: row.status,
      submission: row.submission_state,
      debited,
      credited: CREDITED.has(row.status) ? (debited ?? 0) : 0,
      unpriced: accepted && debited === null,
      partnerRef: row.partner_ref,
      invoiceNumber: row.invoice_number,
    });
  }
  return attempts;
}

/** Attempts by where they stand: the final states, the refused creates, the open ones. */
export type OutcomeCounts = Record<SettlementOutcome, number>;

/** What one supplier's attempts add up to: counts and money. */
export interface SettlementFigures {
  orders: OutcomeCounts;
  /** Accepted attempts without a known price (their debit is not in `spent`). */
  unpriced: number;
  /** What the supplier debited. */
  spent: number;
  /** What the supplier credited back (FAILED and REFUNDED attempts). */
  credited: number;
  /** `spent` − `credited`: what the supplier kept. */
  net: number;
}

/** One line of the report: a day, an upstream and a product. */
export interface SettlementLine extends SettlementFigures {
  day: string;
  upstream: string;
  productCode: string | null;
}

/** An attempt not final yet: its money may still move. */
export interface OpenAttempt {
  day: string;
  upstream: string;
  productCode: string | null;
  shopRef: string;
  partnerRef: string;
  invoiceNumber: string | null;
  status: string | null;
  submission: string;
  debited: number | null;
  placedAt: number;
}

/** The report of a range: its lines, each upstream's totals, the open attempts. */
export interface SettlementReport {
  lines: SettlementLine[];
  totals: ({ upstream: string } & SettlementFigures)[];
  open: OpenAttempt[];
  /** Orders read (each with one or more attempts) and attempts counted. */
  orderCount: number;
  attemptCount: number;
}

function emptyFigures(): SettlementFigures {
  return {
    orders: { SUCCESS: 0, FAILED: 0, REFUNDED: 0, rejected: 0, open: 0 },
    unpriced: 0,
    spent: 0,
    credited: 0,
    net: 0,
  };
}

function addTo(figures: SettlementFigures, attempt: SettlementAttempt): void {
  figures.orders[attempt.outcome] += 1;
  if (attempt.unpriced) figures.unpriced += 1;
  figures.spent += attempt.debited ?? 0;
  figures.credited += attempt.credited;
  figures.net = figures.spent - figures.credited;
}

const byText = (a: string | null, b: string | null) =>
  (a ?? '') < (b ?? '') ? -1 : (a ?? '') > (b ?? '') ? 1 : 0;

/**
 * Adds up the attempts of the orders it is given ({@link SettlementTally.add}), each on the day
 * its order was placed, of one upstream only when `upstream` is given.
 */
export class SettlementTally {
  readonly #lines = new Map<string, SettlementLine>();
  readonly #totals = new Map<string, { upstream: string } & SettlementFigures>();
  readonly #open: OpenAttempt[] = [];
  readonly #upstream: string | undefined;
  #orders = 0;
  #attempts = 0;

  constructor({ upstream }: { upstream?: string } = {}) {
    this.#upstream = upstream;
  }

  /** Counts the attempts of the order `row`, placed on `day`. */
  add(row: SettlementOrderRow, day: string): void {
    const attempts = settlementAttempts(row).filter(
      (a) => this.#upstream === undefined || a.upstream === this.#upstream,
    );
    if (attempts.length === 0) return;
    this.#orders += 1;
    for (const attempt of attempts) {
      this.#attempts += 1;
      const key = `${day}\u0000${attempt.upstream}\u0000${attempt.productCode ?? ''}`;
      let line = this.#lines.get(key);
      if (!line) {
        line = { day, upstream: attempt.upstream, productCode: attempt.productCode, ...emptyFigures() };
        this.#lines.set(key, line);
      }
      addTo(line, attempt);
      let total = this.#totals.get(attempt.upstream);
      if (!total) {
        total = { upstream: attempt.upstream, ...emptyFigures() };
        this.#totals.set(attempt.upstream, total);
      }
      addTo(total, attempt);
      if (attempt.outcome === 'open') {
        const {
          upstream,
          productCode,
          shopRef,
          partnerRef,
          invoiceNumber,
          status,
          submission,
          debited,
          placedAt,
        } = attempt;
        this.#open.push({
          day,
          upstream,
          productCode,
          shopRef,
          partnerRef,
          invoiceNumber,
          status,
          submission,
          debited,
          placedAt,
        });
      }
    }
  }

  /** The report so far: lines by day, upstream and product; totals by upstream; open attempts as read. */
  report(): SettlementReport {
    const lines = [...this.#lines.values()].sort(
      (a, b) =>
        byText(a.day, b.day) || byText(a.upstream, b.upstream) || byText(a.productCode, b.productCode),
    );
    const totals = [...this.#totals.values()].sort((a, b) => byText(a.upstream, b.upstream));
    return {
      lines,
      totals,
      open: [...this.#open],
      orderCount: this.#orders,
      attemptCount: this.#attempts,
    };
  }
}
