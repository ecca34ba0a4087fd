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
  find(
    ex: SqlExecutor,
    partnerRef: string | null,
    invoiceNumber: string | null,
  ): Promise<OrderRow | undefined> {
    return this.#find(ex, partnerRef, invoiceNumber, '');
  }

  /** The order whose partner_ref, else invoice number, is `ref`; `ORDER_NOT_FOUND` when none is. */
  async mustFind(ex: SqlExecutor, ref: string): Promise<OrderRow> {
    return mustExist(await this.find(ex, ref, ref), ref);
  }

  /**
   * {@link find} for a transaction that then rewrites the row: read `FOR UPDATE` on PostgreSQL,
   * so a write of the same row by another transaction (a poll record beside an apply) waits for
   * this one and then reads its result, instead of overwriting it with what it read before
   * (docs/store-backends.md, "Isolation and row locks"). On SQLite `BEGIN IMMEDIATE` already
   * keeps every other writer out.
   */
  findForWrite(
    tx: SqlExecutor,
    partnerRef: string | null,
    invoiceNumber: string | null,
  ): Promise<OrderRow | undefined> {
    return this.#find(tx, partnerRef, invoiceNumber, tx.dialect.forUpdate);
  }

  /** {@link mustFind} for a transaction that then rewrites the row ({@link findForWrite}). */
  async mustFindForWrite(tx: SqlExecutor, ref: string): Promise<OrderRow> {
    return mustExist(await this.findForWrite(tx, ref, ref), ref);
  }

  async #find(
    ex: SqlExecutor,
    partnerRef: string | null,
    invoiceNumber: string | null,
    lock: string,
  ): Promise<OrderRow | undefined> {
    return (
      (partnerRef === null
        ? undefined
        : await ex.get<OrderRow>(`${BY_PARTNER_REF} ${lock}`, { ref: partnerRef })) ??
      (invoiceNumber === null
        ? undefined
        : await ex.get<OrderRow>(`${BY_INVOICE_NUMBER} ${lock}`, { ref: invoiceNumber }))
    );
  }
}

function mustExist(row: OrderRow | undefined, ref: string): OrderRow {
  if (!row) throw new StoreError('ORDER_NOT_FOUND', `no local order has partner_ref or invoice ${ref}`);
  return row;
}
