/**
 * Statements issued together (docs/store-backends.md, "Round trips per apply"): a transaction's
 * statements that do not depend on each other's results are all started first and then awaited
 * here. On PostgreSQL postgres.js writes them to the transaction's connection back to back, one
 * round trip for all; on SQLite each ran at its call, in call order, so nothing changes there.
 *
 * When one fails, every statement settles before this rejects, so none is still running on the
 * transaction when its unit ends, and none is left rejected without a handler. The first rejection in call order
 * (not in time) is thrown: on PostgreSQL a failed statement aborts the transaction, and the ones
 * sent after it fail with 25P02; the first is the cause.
 */
export function together<T extends readonly unknown[]>(
  started: readonly [...{ [K in keyof T]: Promise<T[K]> }],
): Promise<T> {
  // The native Promise.all on the way that succeeds (the cheap one: SQLite runs many of these);
  // only after a failure, the wait for the others and the failure first in call order.
  return (Promise.all(started) as unknown as Promise<T>).catch(async () => {
    const settled = await Promise.allSettled(started);
    throw (settled.find((result) => result.status === 'rejected') as PromiseRejectedResult).reason;
  });
}
