/**
 * Waiting for a promise against a deadline: for work that takes no AbortSignal (an ioredis
 * command, BullMQ's `close()`), so `AbortSignal.timeout` cannot stop it and only the wait can
 * end. The work itself goes on; what it does after the deadline is ignored, and a rejection
 * then is handled here, never left unhandled.
 */

const TIMED_OUT: unique symbol = Symbol('timed out');

/** `work`'s outcome when it settles within `ms`; {@link TIMED_OUT} otherwise. The timer is cleared either way. */
function beforeDeadline<T>(work: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(TIMED_OUT), ms);
    work.then(resolve, reject).finally(() => clearTimeout(timer));
  });
}

/**
 * Settles as `work` does when it settles within `ms`; otherwise rejects with `timeoutError()`
 * at the deadline.
 */
export async function withDeadline<T>(work: Promise<T>, ms: number, timeoutError: () => Error): Promise<T> {
  const outcome = await beforeDeadline(work, ms);
  if (outcome === TIMED_OUT) throw timeoutError();
  return outcome;
}

/**
 * Whether `work` settled (resolved or rejected) within `ms`. For a graceful stop that gives up
 * waiting: the caller awaits `work` itself when it needs the outcome.
 */
export async function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  const settled = work.then(
    () => true,
    () => true,
  );
  return (await beforeDeadline(settled, ms)) !== TIMED_OUT;
}
