/**
 * The balance drift's rules (docs/api.md, "Balance drift"), as pure functions: what one profile
 * read says against the balance h2h-sync expected, which part of the difference open orders
 * explain, when a drift episode starts and ends, when its `balance.drift` event is due, and how
 * much refund the audit owes it. The store's `BalanceLedger` (balance.ts) reads the ledger row and
 * writes what these say, in the catalog sync's transaction.
 */

/** What the ledger row carries from one profile read to the next (`balance_ledger`, schema 29). */
export interface DriftState {
  /** The drift carried so far: the profile balance minus the expected one at the last read. */
  drift: number;
  /** Of it, what nothing open explained at the last read. */
  drift_unexplained: number;
  /** When the current episode began (a profile read time, ms), or null while there is none. */
  drift_since: number | null;
  /** 1 once this episode's `balance.drift` event was appended. */
  drift_alerted: number;
}

/** What a profile read finds, and what to write back ({@link observeDrift}). */
export interface DriftObservation extends DriftState {
  /** The balance h2h-sync expected at the read: the previous expected one plus what the ledger accounted since. */
  expected: number;
  /** This read's own part of the drift: the profile balance minus the accounted balance it replaces. */
  read_drift: number;
  /** The prices of the upstream's orders whose create is in doubt at the read. */
  in_doubt: number;
  /** Whether to append `balance.drift` now (the second read in a row past the threshold, once per episode). */
  alert: boolean;
  /**
   * The refunds the audit should find before this drift counts as explained: what the
   * unexplained positive drift exceeds the threshold by; 0 when the audit is not steered.
   */
  audit_owed: number;
}

/**
 * One profile read of an upstream against its ledger.
 *
 * - `accounted` is the ledger's balance just before the read resets it: the previous profile
 *   balance minus the debits plus the credits accounted since. `read_drift = profile − accounted`.
 * - The drift is carried: `drift = previous drift + read_drift`, so the expected balance
 *   (`profile − drift`) is the previous expected balance plus what the ledger accounted since.
 *   A difference a read finds stays until the ledger accounts it (a late webhook, the audit's
 *   refund), which takes it back out at the next read; a difference that only lagged (an
 *   order's news learnt after the read) cancels itself at the next read. Resetting the expected
 *   balance to each read would show a lost refund at one read only, and a refund the audit
 *   then finds as a debit never learnt at the next.
 * - `in_doubt`: an order whose create may have reached the upstream without an answer may be
 *   debited there and not here, so a negative drift up to their prices is explained (the part
 *   below it is not); a positive drift is never explained by open orders.
 * - With `threshold` > 0, an episode starts at the first read whose unexplained drift is past it
 *   (either way) and ends at the first read that is not (or whose sign turned); `balance.drift`
 *   is due at the episode's second read in a row, once: a one-read difference is an order in
 *   flight (its news arriving after the read), which the next read cancels. A positive
 *   unexplained drift steers the audit from its first read (`audit_owed`). With `threshold` 0,
 *   no episode, no event, no steering: the figures are recorded and shown all the same.
 */
export function observeDrift(input: {
  previous: DriftState | undefined;
  profile: number;
  accounted: number | undefined;
  inDoubt: number;
  threshold: number;
  readAt: number;
}): DriftObservation {
  const { previous, profile, inDoubt, threshold, readAt } = input;
  // The first read sets the baseline: nothing was expected before it.
  const read_drift = input.accounted === undefined ? 0 : profile - input.accounted;
  const drift = (previous?.drift ?? 0) + read_drift;
  const unexplained = drift >= 0 ? drift : Math.min(0, drift + inDoubt);
  const base = {
    drift,
    drift_unexplained: unexplained,
    expected: profile - drift,
    read_drift,
    in_doubt: inDoubt,
  };
  const past = threshold > 0 && Math.abs(unexplained) > threshold;
  if (!past) return { ...base, drift_since: null, drift_alerted: 0, alert: false, audit_owed: 0 };
  const sameEpisode =
    previous !== undefined &&
    previous.drift_since !== null &&
    Math.sign(previous.drift_unexplained) === Math.sign(unexplained);
  const alerted = sameEpisode && previous.drift_alerted === 1;
  return {
    ...base,
    drift_since: sameEpisode ? previous.drift_since : readAt,
    drift_alerted: sameEpisode ? 1 : 0,
    alert: sameEpisode && !alerted,
    audit_owed: unexplained > 0 ? unexplained - threshold : 0,
  };
}

/**
 * Whether the audit is steered by a ledger row's drift: an open positive episode still owed
 * refunds (`audit_owed`, set by {@link observeDrift}) past those the audit found since (`refunded`).
 */
export function isAuditSteered(row: {
  drift_since: number | null;
  audit_owed: number;
  refunded: number;
}): boolean {
  return row.drift_since !== null && row.audit_owed > row.refunded;
}
