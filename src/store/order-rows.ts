import type { OrderRow } from './local-order.js';
import type { SqlExecutor, StoreDb } from './sql/executor.js';
import { StoreError } from './store-error.js';

const BY_PARTNER_REF = 'SELECT * FROM orders WHERE partner_ref = @ref';
const BY_INVOICE_NUMBER = 'SELECT * FROM orders WHERE invoice_number = @ref';

/**
 * What the parts of the order store share: one database (sql/executor.ts), one clock, and how a
 * reference finds an order. Reads take the executor to read on: the database outside a
 * transaction, the transaction's `tx` inside one.
 */
export class OrderRows {
  readonly db: StoreDb;
  /** The clock, in ms since the epoch. */
  readonly now: () => number;

  constructor(db: StoreDb, now: () => number) {
    this.db = db;
    this.now = now;
  }

  /** The order with this partner_ref, else the one with this invoice number. */
  async find(
    ex: SqlExecutor,
    partnerRef: string | null,
    invoiceNumber: string | null,
  ): Promise<OrderRow | undefined> {
    return (
      (partnerRef === null ? undefined : await ex.get<OrderRow>(BY_PARTNER_REF, { ref: partnerRef })) ??
      (invoiceNumber === null ? undefined : await ex.get<OrderRow>(BY_INVOICE_NUMBER, { ref: invoiceNumber }))
    );
  }

  /** The order whose partner_ref, else invoice number, is `ref`; `ORDER_NOT_FOUND` when none is. */
  async mustFind(ex: SqlExecutor, ref: string): Promise<OrderRow> {
    const row = await this.find(ex, ref, ref);
    if (!row) throw new StoreError('ORDER_NOT_FOUND', `no local order has partner_ref or invoice ${ref}`);
    return row;
  }
}
