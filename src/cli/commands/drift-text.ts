import type { PublicBalanceDrift } from '../../catalog/public-catalog.js';

/** An amount with its sign, as a drift reads: `+15,000`, `-3,500`, `0`. */
export function signedAmount(n: number): string {
  return `${n > 0 ? '+' : ''}${n.toLocaleString('en-US')}`;
}

/**
 * One upstream's balance drift for a person (`status`; docs/operations.md, "Balance drift"):
 * the drift, the two balances it is the difference of, what no open order explains, since when,
 * and whether the audit is steered by it.
 */
export function driftText(label: string, d: PublicBalanceDrift): string {
  const parts = [
    `${label}: ${signedAmount(d.drift)} at ${d.read_at} (profile ${d.profile_balance.toLocaleString('en-US')}, expected ${d.expected_balance.toLocaleString('en-US')}`,
  ];
  if (d.in_doubt !== 0) parts.push(`, creates in doubt ${d.in_doubt.toLocaleString('en-US')}`);
  parts.push(')');
  if (d.drift_since !== null) {
    parts.push(`; unexplained ${signedAmount(d.unexplained_drift)} since ${d.drift_since}`);
    if (d.audit_steered) parts.push('; the audit reads its most recent SUCCESS orders first');
  } else if (d.threshold === null) {
    parts.push('; BALANCE_DRIFT_THRESHOLD=0: no event');
  }
  return parts.join('');
}
