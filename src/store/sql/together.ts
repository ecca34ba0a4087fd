/**
 * Statements issued together (docs/store-backends.md, "Round trips per apply"): a transaction's
 * statements that do not depend on each other's results are all started first and then awaited
 * here. On PostgreSQL postgres.js writes them to the transaction's connection back to back, one
 * round trip for all; on SQLite each ran at its call, in call order, so nothing changes there.
 *
 * Every statement settles before this returns, so none is still running on the transaction when
 * its unit ends, and none is left rejected without a handler. The first rejection in call order
 * (not in time) is thrown: on PostgreSQL a failed statement aborts the transaction, and the ones
 * sent after it fail with 25P02; the first is the cause.
 */
export async function together<T extends readonly unknown[]>(
  started: readonly [...{ [K in keyof T]: Promise<T[K]> }],
): Promise<T> {
  const settled = await Promise.allSettled(started);
  const values: unknown[] = [];
  for (const result of settled) {
    if (result.status === 'rejected') throw result.reason;
    values.push(result.value);
  }
  return values as unknown as T;
}
