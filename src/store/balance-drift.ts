import type { PublicBalanceDrift } from '../catalog/public-catalog.js';
import type { LedgerRow } from '../domain/balance-rules.js';
import { type DriftObservation, isAuditSteered, observeDrift } from '../domain/drift-rules.js';
import type { SqlExecutor } from './sql/executor.js';

/**
 * The balance drift's storage (docs/api.md, "Balance drift"): each profile read of an upstream
 * against the balance h2h-sync expected, observed in the catalog sync's transaction by
 * `BalanceLedger.refreshInTx` (the rules are pure, in domain/drift-rules.ts), carried on the
 * upstream's `balance_ledger` row and recorded in `balance_observations`; the views `status` and
 * `upstreams` show; and the steering the audit reads (`OrderClaims.claimForAudit`).
 */

/** A recorded profile read (`balance_observations`, schema 29). */
interface ObservationRow {
  upstream: string;
  read_at: number;
  profile_balance: number;
  expected: number;
  drift: number;
  read_drift: number;
  in_doubt: number;
  unexplained: number;
}

/**
 * The prices of `upstream`'s orders whose create may have reached it without an answer (in
 * doubt, not accepted): each at its product's price in that upstream's catalog (just synced).
 */
async function inDoubtSum(tx: SqlExecutor, upstream: string): Promise<number> {
  const row = await tx.get<{ total: number | null }>(
    `SELECT SUM(p.price) AS total FROM orders o
     JOIN catalog_products p ON p.upstream = o.upstream
       AND (p.code = o.product_code OR (o.product_code IS NULL AND p.id = o.product_id))
     WHERE o.upstream = @upstream AND o.create_in_doubt_at IS NOT NULL AND o.submission_state <> 'accepted'`,
    { upstream },
  );
  return Number(row?.total ?? 0);
}

/**
 * Observes one profile read of `upstream` (`balance` read at `readAt`) against `previous`, its
 * ledger row before the read resets it (undefined: the first read, the baseline), and records it.
 * Only inside the catalog sync's write transaction `tx`, before the ledger row is rewritten.
 */
export async function observeReadInTx(
  tx: SqlExecutor,
  read: {
    upstream: string;
    balance: number;
    readAt: number;
    previous: LedgerRow | undefined;
    threshold: number;
  },
): Promise<DriftObservation> {
  const { upstream, balance, readAt, previous } = read;
  const observation = observeDrift({
    previous,
    profile: balance,
    accounted: previous ? previous.profile_balance - previous.debited + previous.credited : undefined,
    inDoubt: await inDoubtSum(tx, upstream),
    threshold: read.threshold,
    readAt,
  });
  const row: ObservationRow = {
    upstream,
    read_at: readAt,
    profile_balance: balance,
    expected: observation.expected,
    drift: observation.drift,
    read_drift: observation.read_drift,
    in_doubt: observation.in_doubt,
    unexplained: observation.drift_unexplained,
  };
  await tx.run(
    `INSERT INTO balance_observations
       (upstream, read_at, profile_balance, expected, drift, read_drift, in_doubt, unexplained)
     VALUES (@upstream, @read_at, @profile_balance, @expected, @drift, @read_drift, @in_doubt, @unexplained)
     ON CONFLICT (upstream, read_at) DO UPDATE SET profile_balance = excluded.profile_balance,
       expected = excluded.expected, drift = excluded.drift, read_drift = excluded.read_drift,
       in_doubt = excluded.in_doubt, unexplained = excluded.unexplained`,
    row,
  );
  return observation;
}

/** The drift columns of the ledger row a read writes ({@link observeReadInTx}'s outcome). */
export function driftColumns(observation: DriftObservation) {
  return {
    drift: observation.drift,
    drift_unexplained: observation.drift_unexplained,
    drift_since: observation.drift_since,
    drift_alerted: observation.drift_alerted,
    audit_owed: observation.audit_owed,
  };
}

/** The public drift of a ledger row, with the in-doubt sum of its last recorded read (0 before any). */
export async function driftViewOf(
  ex: SqlExecutor,
  row: LedgerRow,
  threshold: number,
): Promise<PublicBalanceDrift> {
  const last = await ex.get<{ in_doubt: number }>(
    'SELECT in_doubt FROM balance_observations WHERE upstream = @upstream ORDER BY read_at DESC LIMIT 1',
    { upstream: row.upstream },
  );
  return {
    upstream: row.upstream,
    profile_balance: row.profile_balance,
    expected_balance: row.profile_balance - row.drift,
    drift: row.drift,
    unexplained_drift: row.drift_unexplained,
    in_doubt: Number(last?.in_doubt ?? 0),
    read_at: new Date(Number(row.profile_read_at)).toISOString(),
    drift_since: row.drift_since === null ? null : new Date(Number(row.drift_since)).toISOString(),
    threshold: threshold === 0 ? null : threshold,
    audit_steered: isAuditSteered(row),
  };
}

/**
 * When the audit of `upstream` is steered by its balance drift: the start of the drift episode
 * (ms), before which the audit re-reads its final SUCCESS orders, most recent first; undefined
 * when it is not (no positive episode, or the refunds found since the read explain it).
 */
export async function auditSteeringOf(ex: SqlExecutor, upstream: string): Promise<number | undefined> {
  const row = await ex.get<Pick<LedgerRow, 'drift_since' | 'audit_owed' | 'refunded'>>(
    'SELECT drift_since, audit_owed, refunded FROM balance_ledger WHERE upstream = @upstream',
    { upstream },
  );
  return row && isAuditSteered(row) ? Number(row.drift_since) : undefined;
}
