import type { Database, RunResult, Statement, Transaction } from 'better-sqlite3';
import type { OrderRow } from './local-order.js';
import { StoreError } from './store-error.js';
import { WriteLock } from './write-lock.js';

/**
 * What the three parts of the order store (writer, poll schedule, queries) share: one connection,
 * one clock, one write lock, and how a reference finds an order.
 */
export class OrderRows {
  readonly db: Database;
  /** The clock, in ms since the epoch. */
  readonly now: () => number;
  readonly #writeLock: WriteLock;
  readonly #byPartnerRef: Statement<[string], OrderRow>;
  readonly #byInvoiceNumber: Statement<[string], OrderRow>;
  readonly #oneTx: Transaction<(statement: Statement<unknown[]>, params: unknown[]) => RunResult>;

  constructor(db: Database, now: () => number) {
    this.db = db;
    this.now = now;
    this.#writeLock = new WriteLock(db);
    this.#byPartnerRef = db.prepare('SELECT * FROM orders WHERE partner_ref = ?');
    this.#byInvoiceNumber = db.prepare('SELECT * FROM orders WHERE invoice_number = ?');
    this.#oneTx = db.transaction((statement, params) => statement.run(...params));
  }

  /** The order with this partner_ref, else the one with this invoice number. */
  find(partnerRef: string | null, invoiceNumber: string | null): OrderRow | undefined {
    return (
      (partnerRef === null ? undefined : this.#byPartnerRef.get(partnerRef)) ??
      (invoiceNumber === null ? undefined : this.#byInvoiceNumber.get(invoiceNumber))
    );
  }

  /** The order whose partner_ref, else invoice number, is `ref`; `ORDER_NOT_FOUND` when none is. */
  mustFind(ref: string): OrderRow {
    const row = this.find(ref, ref);
    if (!row) throw new StoreError('ORDER_NOT_FOUND', `no local order has partner_ref or invoice ${ref}`);
    return row;
  }

  /** Runs one write statement as its own transaction, like {@link write}. */
  writeOne<P extends unknown[]>(statement: Statement<P>, ...params: P): RunResult {
    return this.write(this.#oneTx, statement as unknown as Statement<unknown[]>, params);
  }

  /** Runs a write transaction as `BEGIN IMMEDIATE`, waiting for another process's lock (write-lock.ts). */
  write<A extends unknown[], R>(tx: Transaction<(...args: A) => R>, ...args: A): R {
    return this.#writeLock.run(tx, ...args);
  }
}
