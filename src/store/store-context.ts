import { isEndedAttempt, shopRefOf } from '../domain/attempt-records.js';
import type { OrderRow } from './local-order.js';
import type { SqlExecutor, StoreDb } from './sql/executor.js';
import { StoreError } from './store-error.js';

/**
 * What every part of the order store (order-store.ts) is built on: the database and the clock
 * they share, and the one way a reference (partner_ref, else the shop's ref, else invoice number)
 * finds an order's row, for reading or, locked, for rewriting. An order's `partner_ref` is its
 * current attempt's; its `shop_ref` the shop's (docs/upstreams.md, "Orders and attempts").
 */

/**
 * The order whose current attempt has the partner_ref, else the one the shop placed under it
 * (`shop_ref`: an order gone on to a later attempt keeps the shop's ref; docs/upstreams.md).
 */
const BY_REF = `SELECT * FROM orders WHERE id = (
  SELECT id FROM (
    SELECT id, 0 AS pick FROM orders WHERE partner_ref = @ref
    UNION ALL SELECT id, 1 AS pick FROM orders WHERE shop_ref = @ref
  ) AS found ORDER BY pick LIMIT 1)`;
/**
 * An invoice number is one upstream's (unique per upstream: the index `orders_invoice_upstream`,
 * schema 22). With the upstream known (`@upstream`) it names at most one order; without it (a
 * reference typed by a person) the first order of any upstream with that number.
 */
const invoiceCondition = (upstream: string | undefined) =>
  upstream === undefined ? 'invoice_number = @invoice' : 'invoice_number = @invoice AND upstream = @upstream';
const byInvoiceNumber = (upstream: string | undefined) =>
  `SELECT * FROM orders WHERE ${invoiceCondition(upstream)} ORDER BY id LIMIT 1`;
/**
 * The look-ups in one statement (one round trip on PostgreSQL): the row with the partner_ref
 * first, else the one the shop placed under it ({@link BY_REF}), else the one with the invoice
 * number. The inner query finds at most three ids (with the
 * upstream known; else the first of the invoice number's) and keeps the first by `pick`; the outer reads that one row by its id, and on
 * PostgreSQL `FOR UPDATE` locks only it, as the two statements did. Two index look-ups and one
 * by primary key, whatever the table's size: `WHERE partner_ref = @ref OR invoice_number =
 * @invoice` is planned as a sequential scan on PostgreSQL while the table is small, and a
 * connection keeps that generic plan of its prepared statement as the table grows (seen: the
 * apply slowed down batch after batch on a new store).
 */
const byEither = (upstream: string | undefined) => `SELECT * FROM orders WHERE id = (
  SELECT id FROM (
    SELECT id, 0 AS pick FROM orders WHERE partner_ref = @ref
    UNION ALL SELECT id, 1 AS pick FROM orders WHERE shop_ref = @ref
    UNION ALL SELECT id, 2 AS pick FROM orders WHERE ${invoiceCondition(upstream)}
  ) AS found ORDER BY pick, id LIMIT 1)`;

/**
 * A row of `orders` as the store returns it (`SELECT *`): {@link OrderRow} and the columns no
 * plan writes, the balance accounting's `debited_amount` (balance.ts) and the claim's lease.
 */
export type StoredOrderRow = OrderRow & {
  debited_amount: number | null;
  poll_leased_until: number | null;
  /** Who holds the claim that `poll_leased_until` bounds (order-claims.ts). */
  lease_token: string | null;
};

/**
 * What the parts of the order store share: one database (sql/executor.ts), one clock, and how a
 * reference finds an order. Reads take the executor to read on: the database outside a
 * transaction, the transaction's `tx` inside one.
 */
export class StoreContext {
  readonly db: StoreDb;
  /** The clock, in ms since the epoch. */
  readonly now: () => number;

  constructor(db: StoreDb, now: () => number) {
    this.db = db;
    this.now = now;
  }

  /**
   * The order with this partner_ref (its current attempt's), else the one the shop placed under
   * it, else the one with this invoice number (of `upstream`, when given: an invoice number is
   * one upstream's).
   */
  find(
    ex: SqlExecutor,
    partnerRef: string | null,
    invoiceNumber: string | null,
    upstream?: string,
  ): Promise<StoredOrderRow | undefined> {
    return this.#find(ex, partnerRef, invoiceNumber, '', upstream);
  }

  /**
   * The order whose partner_ref, else shop ref, else invoice number, else ended attempt
   * ({@link findEndedAttempt}) is `ref`; `ORDER_NOT_FOUND` when none is.
   */
  async mustFind(ex: SqlExecutor, ref: string): Promise<StoredOrderRow> {
    return mustExist((await this.find(ex, ref, ref)) ?? (await this.findEndedAttempt(ex, ref, '')), ref);
  }

  /**
   * The order one of whose ended attempts after the first has the partner_ref `ref`
   * (`<shop ref>~<n>`; the first's is the order's `shop_ref`, which {@link find} finds), if any
   * (docs/upstreams.md, "Orders and attempts"): what arrives about that attempt is then
   * recorded under it and changes nothing, instead of being taken for an order placed elsewhere
   * or failing for an unknown ref. `lock`: the dialect's `FOR UPDATE`, or empty.
   */
  async findEndedAttempt(
    ex: SqlExecutor,
    ref: string | null,
    lock: string,
  ): Promise<StoredOrderRow | undefined> {
    if (ref === null || shopRefOf(ref) === ref) return undefined;
    const order = await this.#find(ex, shopRefOf(ref), null, lock, undefined);
    return order && isEndedAttempt(order, ref) ? order : undefined;
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
    upstream?: string,
  ): Promise<StoredOrderRow | undefined> {
    return this.#find(tx, partnerRef, invoiceNumber, tx.dialect.forUpdate, upstream);
  }

  /** {@link mustFind} for a transaction that then rewrites the row ({@link findForWrite}). */
  async mustFindForWrite(tx: SqlExecutor, ref: string): Promise<StoredOrderRow> {
    return mustExist(
      (await this.findForWrite(tx, ref, ref)) ?? (await this.findEndedAttempt(tx, ref, tx.dialect.forUpdate)),
      ref,
    );
  }

  /** Issues its one statement at the call (so it can be issued together with others: sql/together.ts). */
  #find(
    ex: SqlExecutor,
    partnerRef: string | null,
    invoiceNumber: string | null,
    lock: string,
    upstream: string | undefined,
  ): Promise<StoredOrderRow | undefined> {
    const scope = upstream === undefined ? {} : { upstream };
    if (partnerRef !== null && invoiceNumber !== null) {
      return ex.get<StoredOrderRow>(`${byEither(upstream)} ${lock}`, {
        ref: partnerRef,
        invoice: invoiceNumber,
        ...scope,
      });
    }
    if (partnerRef !== null) return ex.get<StoredOrderRow>(`${BY_REF} ${lock}`, { ref: partnerRef });
    if (invoiceNumber !== null) {
      return ex.get<StoredOrderRow>(`${byInvoiceNumber(upstream)} ${lock}`, {
        invoice: invoiceNumber,
        ...scope,
      });
    }
    return Promise.resolve(undefined);
  }
}

function mustExist(row: StoredOrderRow | undefined, ref: string): StoredOrderRow {
  if (!row) throw new StoreError('ORDER_NOT_FOUND', `no local order has partner_ref or invoice ${ref}`);
  return row;
}
