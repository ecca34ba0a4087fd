import { StoreError } from '../store-error.js';

/**
 * The PostgreSQL store's errors: lock waits that gave up (STORE_BUSY), and connection loss and
 * read-only servers in its writes (docs/deployment.md, "PostgreSQL with a standby"): which
 * errors mean the connection is gone or the server read-only, and the errors a write ends with
 * when no writable server answered.
 */

/** Socket errors of a connection that is gone (Node's `code`). */
const SOCKET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH']);

/**
 * SQLSTATEs of a server ending the session: admin_shutdown (57P01, also the read-only check
 * below), crash_shutdown (57P02, a server restarting after another backend crashed),
 * cannot_connect_now (57P03, a server starting up or shutting down).
 */
const SHUTDOWN_CODES = new Set(['57P01', '57P02', '57P03']);

/** read_only_sql_transaction: a write on a read-only server. */
export const READ_ONLY_CODE = '25006';

/** Whether `error` is a write refused by a read-only server (25006), as the driver or the store gives it. */
export function isReadOnly(error: unknown): boolean {
  const { code, cause } = (error ?? {}) as { code?: unknown; cause?: unknown };
  return (
    code === READ_ONLY_CODE ||
    (error instanceof StoreError && (cause as { code?: unknown })?.code === READ_ONLY_CODE)
  );
}

/**
 * Whether `error` means the connection (and its transaction, if one was open) is gone: the
 * driver's CONNECTION_* codes, socket errors, class 08 (connection exception), a server ending
 * the session (57P0x), or any FATAL or PANIC error. Nothing of an uncommitted transaction was
 * kept; whether a COMMIT in flight was kept cannot be told.
 */
export function isConnectionLost(error: unknown): boolean {
  const { code, severity } = (error ?? {}) as { code?: unknown; severity?: unknown };
  if (severity === 'FATAL' || severity === 'PANIC') return true;
  if (typeof code !== 'string') return false;
  return (
    code.startsWith('CONNECTION_') ||
    code.startsWith('08') ||
    SHUTDOWN_CODES.has(code) ||
    SOCKET_CODES.has(code)
  );
}

/**
 * A promise that never settles, for a statement whose connection is lost inside `sql.begin()`:
 * the transaction body then waits instead of failing, and `begin()` rejects when the driver
 * reports the connection closed. Failing the body would make postgres.js 3.4 send ROLLBACK on
 * the closed connection from a timer, where its write to the missing socket throws out of reach
 * of any caller and ends the process (porsager/postgres#1208, #1154). A new promise each time,
 * so that nothing waits on it once its transaction is gone.
 */
export function untilBeginRejects(): Promise<never> {
  return new Promise<never>(() => {});
}

/** Where a write was when its connection was lost: its opening statements, its body, or COMMIT. */
export type WriteStage = 'opening' | 'body' | 'commit';

/**
 * The error of a write whose connection was lost (`stage`) on its last try: at COMMIT, whether
 * it was kept cannot be told (STORE_COMMIT_UNKNOWN); before, nothing was written
 * (STORE_UNAVAILABLE). Both are transient: the caller's retry applies the write again (the
 * event worker's through BullMQ; an event already applied is a duplicate, which changes nothing).
 */
export function lostConnectionError(
  label: string,
  stage: WriteStage,
  tries: number,
  cause: unknown,
): StoreError {
  const why = (cause as Error | null)?.message ?? String(cause);
  if (stage === 'commit') {
    return new StoreError(
      'STORE_COMMIT_UNKNOWN',
      `the connection to ${label} was lost during COMMIT (${why}): the write may or may not have been ` +
        'made. An order event or an order placed by its partner_ref may be tried again (a repeat changes nothing); ' +
        'for anything else (an endpoint, a token), check whether it is there before repeating it',
      { cause },
    );
  }
  return new StoreError(
    'STORE_UNAVAILABLE',
    `no writable PostgreSQL server at ${label} in ${tries} tries (${why}): nothing was written and the ` +
      'write may be tried again. A server that is read-only (a standby not yet promoted) or down was left; ' +
      'with a primary and standbys, list them all in H2H_DB_URL with target_session_attrs=read-write',
    { cause },
  );
}

/** The error of a statement that found the server read-only (25006): nothing was written. */
export function readOnlyError(label: string, cause: unknown): StoreError {
  return new StoreError(
    'STORE_UNAVAILABLE',
    `${label} is read-only (${(cause as Error).message}): nothing was written and the write may be tried ` +
      'again; H2H_DB_URL must reach the primary (with standbys: target_session_attrs=read-write)',
    { cause },
  );
}

/**
 * SQLSTATEs after which the same transaction, tried again, may succeed: a lock not taken within
 * `lock_timeout` (55P03), a deadlock victim (40P01), a serialization failure (40001). They become
 * one {@link StoreError} `STORE_BUSY`, which callers retry as they retry SQLITE_BUSY.
 */
const BUSY_CODES = new Set(['55P03', '40P01', '40001']);

/**
 * The store's error for a driver error: STORE_BUSY for a lock wait that gave up,
 * STORE_UNAVAILABLE for a write on a read-only server, else as it is.
 */
export function mapPostgresError(error: unknown, label = 'the store'): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === READ_ONLY_CODE) return readOnlyError(label, error);
  if (typeof code === 'string' && BUSY_CODES.has(code)) {
    return new StoreError(
      'STORE_BUSY',
      `the store was busy (${code}: ${(error as Error).message}): another process held a lock past ` +
        'the wait allowed (H2H_DB_LOCK_TIMEOUT_MS); the write was not made and may be tried again',
      { cause: error },
    );
  }
  return error;
}
