import Table from 'cli-table3';
import { ConfigError } from '../config/config.js';
import { UpstreamError, UpstreamUnreachableError } from '../upstream/errors.js';

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

/** Prints `value` as JSON (for `--json`) or as a table. */
export function printResult<T>(value: T | readonly T[], json: boolean, columns: readonly Column<T>[]): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
    return;
  }
  const rows = (Array.isArray(value) ? value : [value]) as readonly T[];
  process.stdout.write(`${renderTable(rows, columns)}\n`);
}

/**
 * Exit codes of the CLI, documented in docs/cli.md: `config` also for an upstream refusal of our
 * configuration (401/403, a 404 of a route that always exists) and a blocked order.
 */
export const EXIT = { ok: 0, failed: 1, config: 2, unknownOutcome: 3 } as const;

/** What an error means for a person or a script: one line, a code, the fix, an exit code. */
export function describeError(err: unknown): {
  code: string;
  message: string;
  fix?: string;
  exitCode: number;
} {
  if (err instanceof ConfigError) return { code: err.code, message: err.message, exitCode: EXIT.config };
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
