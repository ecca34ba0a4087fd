import type postgres from 'postgres';
import type { Dialect, Params, SqlExecutor } from '../sql/executor.js';
import { type CompiledSql, compileNamed, valuesOf } from './named-params.js';
import { isConnectionLost, mapPostgresError, untilBeginRejects } from './postgres-errors.js';

/**
 * The PostgreSQL store's statements (postgres-db.ts runs its transactions): named parameters
 * compiled once per text, and the executor of one transaction or savepoint.
 */

/** The store's postgres.js pool. */
export type Sql = postgres.Sql<Record<string, never>>;
type AnySql = Sql | postgres.TransactionSql<Record<string, never>>;

/** Statements compiled from named to numbered parameters, by text (shared by every connection). */
const compiled = new Map<string, CompiledSql>();
function compile(sql: string): CompiledSql {
  let entry = compiled.get(sql);
  if (entry === undefined) {
    entry = compileNamed(sql);
    compiled.set(sql, entry);
  }
  return entry;
}

/**
 * Runs one statement. Inside a transaction (`onLost` given), a statement whose connection is
 * lost calls `onLost` (the store replaces its pool, whose end closes that connection for sure)
 * and never settles: `begin()` rejects instead (postgres-errors.ts, {@link untilBeginRejects}).
 */
export async function query<R>(
  sql: AnySql,
  text: string,
  params: Params | undefined,
  onLost?: () => void,
): Promise<R[] & { count: number }> {
  const statement = compile(text);
  try {
    // biome-ignore lint/suspicious/noExplicitAny: the driver's parameter type is a union we do not narrow
    const values = valuesOf(statement, params) as any[];
    return (await sql.unsafe(statement.text, values, { prepare: true })) as unknown as R[] & {
      count: number;
    };
  } catch (error) {
    if (onLost && isConnectionLost(error)) {
      onLost();
      return untilBeginRejects();
    }
    throw mapPostgresError(error);
  }
}

/** The executor of one transaction (or savepoint); refuses statements once it ended. */
export class PostgresTx implements SqlExecutor {
  readonly dialect: Dialect;
  readonly #sql: AnySql;
  readonly #onLost: () => void;
  open = true;

  /** `onLost`: called when a statement finds the connection lost (see {@link query}). */
  constructor(sql: AnySql, dialect: Dialect, onLost: () => void) {
    this.#sql = sql;
    this.dialect = dialect;
    this.#onLost = onLost;
  }

  #checked(): AnySql {
    if (!this.open)
      throw new Error('a statement on a transaction that has ended (use the store, not its tx)');
    return this.#sql;
  }

  async all<R>(sql: string, params?: Params): Promise<R[]> {
    return [...(await query<R>(this.#checked(), sql, params, this.#onLost))];
  }

  async get<R>(sql: string, params?: Params): Promise<R | undefined> {
    return (await query<R>(this.#checked(), sql, params, this.#onLost))[0];
  }

  async run(sql: string, params?: Params): Promise<{ changes: number }> {
    return { changes: (await query(this.#checked(), sql, params, this.#onLost)).count };
  }

  async exec(sql: string): Promise<void> {
    try {
      await this.#checked().unsafe(sql);
    } catch (error) {
      if (!isConnectionLost(error)) throw mapPostgresError(error);
      this.#onLost();
      return untilBeginRejects();
    }
  }
}
