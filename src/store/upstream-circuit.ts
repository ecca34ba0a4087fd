import { DEFAULT_UPSTREAM } from '../upstream/model.js';
import type { SqlExecutor } from './sql/executor.js';
import type { StoreContext } from './store-context.js';

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
 * One upstream's circuit (docs/reconciler.md, "The circuit"; docs/upstreams.md), kept in the
 * order database (`upstream_circuit`, one row per upstream while its circuit is open) so that
 * every process sees it and `h2h-sync status` shows it without Redis. It only keeps the state:
 * when it opens, when it is probed and when it closes are the reconciler's rules
 * (`src/reconciler/reconcile-pass.ts`).
 */
const READ = 'SELECT * FROM upstream_circuit WHERE upstream = @upstream';

export class UpstreamCircuit {
  readonly #context: StoreContext;
  /** The upstream whose circuit this is. */
  readonly upstream: string;

  constructor(context: StoreContext, upstream: string = DEFAULT_UPSTREAM) {
    this.#context = context;
    this.upstream = upstream;
  }

  /** The open circuit, or null while it is closed. Reads only. */
  async state(): Promise<OpenCircuit | null> {
    const row = await this.#context.db.get<CircuitRow>(READ, { upstream: this.upstream });
    return row ? toOpenCircuit(row) : null;
  }

  /** Opens the circuit, or updates its cause and error when it is open already (keeping when it opened). */
  open(cause: CircuitCause, error: CircuitError): Promise<OpenCircuit> {
    return this.#write(cause, error, false);
  }

  /** Records a probe that failed: the circuit stays (or becomes) open with what the probe met. */
  probeFailed(cause: CircuitCause, error: CircuitError): Promise<OpenCircuit> {
    return this.#write(cause, error, true);
  }

  /** Closes the circuit; returns the circuit that was open, or null when it was closed already. */
  close(): Promise<OpenCircuit | null> {
    return this.#context.db.write(async (tx) => {
      const current = await tx.get<CircuitRow>(`${READ} ${tx.dialect.forUpdate}`, {
        upstream: this.upstream,
      });
      await tx.run('DELETE FROM upstream_circuit WHERE upstream = @upstream', { upstream: this.upstream });
      return current ? toOpenCircuit(current) : null;
    });
  }

  #write(cause: CircuitCause, error: CircuitError, probe: boolean): Promise<OpenCircuit> {
    return this.#context.db.write(async (tx: SqlExecutor) => {
      const now = this.#context.now();
      const current = await tx.get<CircuitRow>(`${READ} ${tx.dialect.forUpdate}`, {
        upstream: this.upstream,
      });
      const row: CircuitRow = {
        cause,
        code: error.code,
        message: error.message,
        fix: error.fix ?? null,
        opened_at: current?.opened_at ?? now,
        probed_at: probe ? now : (current?.probed_at ?? null),
        probes: (current?.probes ?? 0) + (probe ? 1 : 0),
      };
      await tx.run(
        `INSERT INTO upstream_circuit (upstream, cause, code, message, fix, opened_at, probed_at, probes)
         VALUES (@upstream, @cause, @code, @message, @fix, @opened_at, @probed_at, @probes)
         ON CONFLICT (upstream) DO UPDATE SET cause = excluded.cause, code = excluded.code,
           message = excluded.message, fix = excluded.fix,
           opened_at = CASE WHEN @keep = 1 THEN upstream_circuit.opened_at ELSE excluded.opened_at END,
           probed_at = excluded.probed_at, probes = excluded.probes`,
        { ...row, upstream: this.upstream, keep: current ? 1 : 0 },
      );
      return toOpenCircuit(row);
    });
  }
}
