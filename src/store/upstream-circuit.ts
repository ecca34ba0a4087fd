import type { Statement, Transaction } from 'better-sqlite3';
import type { OrderRows } from './order-rows.js';

/**
 * Why the reconciler stopped calling the upstream (docs/reconciler.md, "The circuit"): causes
 * that concern every order, never one order alone.
 * - `unauthorized`: 401/403, the API key or the IP whitelist (H2H_API_KEY, the member's whitelist);
 * - `base_url`: a 404 of a route that always exists (`POST /orders`, `GET /profile`): H2H_BASE_URL;
 * - `upstream_failing`: 5xx or no answer for several different orders in a row.
 */
export const CIRCUIT_CAUSES = ['unauthorized', 'base_url', 'upstream_failing'] as const;
export type CircuitCause = (typeof CIRCUIT_CAUSES)[number];

/** What the upstream said when the circuit opened (or at its last failed probe), with the fix. */
export interface CircuitError {
  code: string;
  message: string;
  fix?: string | undefined;
}

/** An open circuit. */
export interface OpenCircuit {
  cause: CircuitCause;
  code: string;
  message: string;
  fix: string | null;
  /** When it opened, in ms. */
  openedAt: number;
  /** The last probe that failed, in ms; null before the first. */
  probedAt: number | null;
  /** Failed probes since it opened. */
  probes: number;
}

interface CircuitRow {
  cause: CircuitCause;
  code: string;
  message: string;
  fix: string | null;
  opened_at: number;
  probed_at: number | null;
  probes: number;
}

function toOpenCircuit(row: CircuitRow): OpenCircuit {
  return {
    cause: row.cause,
    code: row.code,
    message: row.message,
    fix: row.fix,
    openedAt: row.opened_at,
    probedAt: row.probed_at,
    probes: row.probes,
  };
}

/**
 * The reconciler's circuit, kept in the order database (`upstream_circuit`, one row while open)
 * so that every process sees it and `h2h-sync status` shows it without Redis. It only keeps the
 * state: when it opens, when it is probed and when it closes are the reconciler's rules
 * (`src/reconciler/reconcile-pass.ts`).
 */
export class UpstreamCircuit {
  readonly #rows: OrderRows;
  readonly #read: Statement<[], CircuitRow>;
  readonly #openTx: Transaction<(cause: CircuitCause, error: CircuitError, now: number) => OpenCircuit>;
  readonly #probeFailedTx: Transaction<
    (cause: CircuitCause, error: CircuitError, now: number) => OpenCircuit
  >;
  readonly #closeTx: Transaction<() => OpenCircuit | null>;

  constructor(rows: OrderRows) {
    this.#rows = rows;
    const { db } = rows;
    this.#read = db.prepare('SELECT * FROM upstream_circuit WHERE id = 1');
    const upsert = db.prepare<[CircuitRow & { keep: number }]>(
      `INSERT INTO upstream_circuit (id, cause, code, message, fix, opened_at, probed_at, probes)
       VALUES (1, @cause, @code, @message, @fix, @opened_at, @probed_at, @probes)
       ON CONFLICT (id) DO UPDATE SET cause = excluded.cause, code = excluded.code,
         message = excluded.message, fix = excluded.fix,
         opened_at = CASE WHEN @keep = 1 THEN opened_at ELSE excluded.opened_at END,
         probed_at = excluded.probed_at, probes = excluded.probes`,
    );
    const remove = db.prepare('DELETE FROM upstream_circuit WHERE id = 1');
    const write = (cause: CircuitCause, error: CircuitError, now: number, probe: boolean) => {
      const current = this.#read.get();
      const row: CircuitRow = {
        cause,
        code: error.code,
        message: error.message,
        fix: error.fix ?? null,
        opened_at: current?.opened_at ?? now,
        probed_at: probe ? now : (current?.probed_at ?? null),
        probes: (current?.probes ?? 0) + (probe ? 1 : 0),
      };
      upsert.run({ ...row, keep: current ? 1 : 0 });
      return toOpenCircuit(row);
    };
    this.#openTx = db.transaction((cause, error, now) => write(cause, error, now, false));
    this.#probeFailedTx = db.transaction((cause, error, now) => write(cause, error, now, true));
    this.#closeTx = db.transaction(() => {
      const current = this.#read.get();
      remove.run();
      return current ? toOpenCircuit(current) : null;
    });
  }

  /** The open circuit, or null while it is closed. Reads only. */
  state(): OpenCircuit | null {
    const row = this.#read.get();
    return row ? toOpenCircuit(row) : null;
  }

  /** Opens the circuit, or updates its cause and error when it is open already (keeping when it opened). */
  open(cause: CircuitCause, error: CircuitError): OpenCircuit {
    return this.#rows.write(this.#openTx, cause, error, this.#rows.now());
  }

  /** Records a probe that failed: the circuit stays (or becomes) open with what the probe met. */
  probeFailed(cause: CircuitCause, error: CircuitError): OpenCircuit {
    return this.#rows.write(this.#probeFailedTx, cause, error, this.#rows.now());
  }

  /** Closes the circuit; returns the circuit that was open, or null when it was closed already. */
  close(): OpenCircuit | null {
    return this.#rows.write(this.#closeTx);
  }
}
