import Table from 'cli-table3';
import { ConfigError } from '../config/config.js';
import { NotifyError } from '../notify/notify-error.js';
import { StoreError } from '../store/store-error.js';
import { UpstreamError, UpstreamUnreachableError } from '../upstream/errors.js';
import { EXIT } from './exit-codes.js';
import { toPublicJson } from './public-json.js';

/** A column of a human-readable table: the header and how to read the cell from a row. */
export interface Column<T> {
  header: string;
  cell: (row: T) => unknown;
}

/** Formats rows as a terminal table; `null`/`undefined` cells show as `-`. */
export function renderTable<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  const table = new Table({ head: columns.map((c) => c.header), style: { head: [], border: [] } });
  for (const row of rows) table.push(columns.map((c) => String(c.cell(row) ?? '-')));
  return table.toString();
}

/**
 * Prints `value` as JSON (for `--json`) or as a table. The JSON is `value` as it is: for a value in
 * the public form already (an upstream answer); the CLI's own values go through {@link printPublicJson}.
 */
export function printResult<T>(value: T | readonly T[], json: boolean, columns: readonly Column<T>[]): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
    return;
  }
  const rows = (Array.isArray(value) ? value : [value]) as readonly T[];
  process.stdout.write(`${renderTable(rows, columns)}\n`);
}

/** Prints one of the CLI's own values (a report, a token, a delivery) for `--json`, in the public form. */
export function printPublicJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(toPublicJson(value), null, 2)}\n`);
}

/** What to do when a server cannot listen, by error code. */
const LISTEN_FIXES: Record<string, string> = {
  EADDRINUSE:
    'another process listens there: stop it, or choose another port (PORT for the receiver, H2H_RECEIVER_METRICS_PORT for its metrics, ADMIN_PORT for the worker, API_PORT for the shop API)',
  EACCES: 'this user may not listen on that port: choose a port above 1023',
  EADDRNOTAVAIL:
    'that address is not one of this machine: fix HOST, ADMIN_HOST, API_HOST or H2H_RECEIVER_METRICS_HOST',
};

/** What an error means for a person or a script: one line, a code, the fix, an exit code. */
export function describeError(err: unknown): {
  code: string;
  message: string;
  fix?: string;
  exitCode: number;
} {
  if (err instanceof ConfigError) return { code: err.code, message: err.message, exitCode: EXIT.config };
  // A store that cannot be opened, or is not there for a command that only reads, is fixed in
  // H2H_DB_URL/H2H_DB_PATH; `store migrate`'s wrong source or target, or a target with rows, in its settings or --to;
  // `store backup`'s PATH, `store backup`/`vacuum` on PostgreSQL, a disk too full to vacuum.
  if (
    err instanceof StoreError &&
    (err.code === 'DATABASE_OPEN_FAILED' ||
      err.code === 'STORE_NOT_FOUND' ||
      err.code === 'DATABASE_TOO_NEW' ||
      err.code === 'INVALID_SCOPE' ||
      err.code === 'INVALID_TOKEN_NAME' ||
      err.code === 'NOT_SQLITE_SOURCE' ||
      err.code === 'NOT_POSTGRES_TARGET' ||
      err.code === 'TARGET_NOT_EMPTY' ||
      err.code === 'NOT_SQLITE_STORE' ||
      err.code === 'BACKUP_EXISTS' ||
      err.code === 'BACKUP_PATH_INVALID' ||
      err.code === 'NOT_ENOUGH_DISK')
  ) {
    return { code: err.code, message: err.message, exitCode: EXIT.config };
  }
  // A URL, event filter or time that cannot be read is a usage problem.
  if (err instanceof NotifyError && err.code !== 'ENDPOINT_NOT_FOUND') {
    return { code: err.code, message: err.message, exitCode: EXIT.config };
  }
  const listen = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (listen?.syscall === 'listen' && typeof listen.code === 'string') {
    const where =
      listen.port === undefined ? String(listen.address ?? '') : `${listen.address}:${listen.port}`;
    const fix = LISTEN_FIXES[listen.code] ?? 'check the host and port settings';
    return {
      code: listen.code,
      message: `cannot listen on ${where} (${listen.code}): ${fix}`,
      fix,
      exitCode: EXIT.config,
    };
  }
  if (err instanceof UpstreamUnreachableError) {
    return { code: err.code, message: err.message, fix: err.fix, exitCode: EXIT.unknownOutcome };
  }
  if (err instanceof UpstreamError) {
    return {
      code: err.code,
      message: `${err.code} (${err.status}): ${err.detail} — ${err.fix}`,
      fix: err.fix,
      // A refusal of our configuration (the key, the whitelist, the base URL) is fixed in settings.
      exitCode: err.configuration === undefined ? EXIT.failed : EXIT.config,
    };
  }
  const e = err as { code?: unknown; message?: unknown };
  return {
    code: typeof e?.code === 'string' ? e.code : 'ERROR',
    message: typeof e?.message === 'string' ? e.message : String(err),
    exitCode: EXIT.failed,
  };
}

/**
 * Runs a command action, turning any error into one line on stderr (or a JSON error object on
 * stdout under `--json`) and the matching exit code.
 */
export async function runAction(json: boolean, action: () => Promise<void>): Promise<void> {
  try {
    await action();
  } catch (err) {
    const { code, message, fix, exitCode } = describeError(err);
    if (json) process.stdout.write(`${JSON.stringify({ error: { code, message, fix } }, null, 2)}\n`);
    else process.stderr.write(`error: ${message}\n`);
    process.exitCode = exitCode;
  }
}

/**
 * Runs a long-lived process's start-up (`receiver`, `worker`): on failure it prints the error
 * and exits at once with its code. Setting `process.exitCode` is not enough there: under pm2 the
 * IPC channel to the pm2 daemon (and any half-opened connection) keeps the process alive, so pm2
 * would show a process `online` that serves nothing instead of restarting it.
 */
export async function runService(start: () => Promise<void>): Promise<void> {
  try {
    await start();
  } catch (err) {
    const { message, exitCode } = describeError(err);
    process.stderr.write(`error: ${message}\n`);
    process.exit(exitCode);
  }
}
