import type { CircuitCause, CircuitError, OpenCircuit } from '../store/upstream-circuit.js';
import { classifyFailure, describePollError, type ReconcilerDeps } from './poll-order.js';

/**
 * Different orders that may fail in a row (5xx, no answer) before the circuit opens: then the
 * upstream is failing, not one order, and every further poll would spend budget for nothing.
 * One failing order never counts twice in a pass (it goes on its own backoff).
 */
export const CIRCUIT_OPENS_AFTER = 3;

/** What a probe of the upstream came to. */
export type ProbeResult =
  | { ok: true; calls: number }
  | {
      ok: false;
      /** `budget` and `rate_limited` say nothing about the upstream: the circuit is left as it is. */
      reason: CircuitCause | 'budget' | 'rate_limited';
      error: CircuitError;
      calls: number;
      retryAfterMs?: number;
    };

/**
 * One `GET /profile`, drawn from the poll share of the budget without waiting: it answers only
 * when the key, the whitelist and the base URL all work and the upstream is up. Never throws for
 * upstream trouble.
 */
export async function probeUpstream(deps: ReconcilerDeps): Promise<ProbeResult> {
  try {
    await deps.client.profile({ priority: 'poll' });
    deps.metrics?.countProbe('ok');
    return { ok: true, calls: 1 };
  } catch (error) {
    const failure = classifyFailure(error);
    const { reason: met } = failure;
    const reason =
      met === 'budget' || met === 'rate_limited' || met === 'unauthorized' || met === 'base_url'
        ? met
        : 'upstream_failing';
    if (reason !== 'budget') deps.metrics?.countProbe('failed');
    return {
      ok: false,
      reason,
      error: describePollError(error as Error),
      calls: failure.calls,
      ...(failure.retryAfterMs === undefined ? {} : { retryAfterMs: failure.retryAfterMs }),
    };
  }
}

/** Opens the circuit (or updates why it is open), logs it with the fix and counts it. */
export async function openCircuit(
  deps: ReconcilerDeps,
  cause: CircuitCause,
  error: CircuitError,
): Promise<OpenCircuit> {
  const before = await deps.store.circuit.state();
  const circuit = await deps.store.circuit.open(cause, error);
  if (before?.cause !== cause) {
    deps.metrics?.countCircuitOpened(cause);
    deps.logger?.[cause === 'upstream_failing' ? 'warn' : 'error'](
      { cause, code: error.code, fix: error.fix },
      `reconciler circuit open (${cause}): no order is polled until a probe succeeds — ${error.fix ?? error.message}`,
    );
  }
  return circuit;
}

/** Records a failed probe: the circuit stays open with what the probe met. */
export async function probeFailed(
  deps: ReconcilerDeps,
  cause: CircuitCause,
  error: CircuitError,
): Promise<OpenCircuit> {
  const before = await deps.store.circuit.state();
  const circuit = await deps.store.circuit.probeFailed(cause, error);
  if (before?.cause !== cause) deps.metrics?.countCircuitOpened(cause);
  deps.logger?.[cause === 'upstream_failing' ? 'warn' : 'error'](
    { cause, code: error.code, fix: error.fix, probes: circuit.probes, openedAt: circuit.openedAt },
    `reconciler circuit stays open (${cause}): the probe failed — ${error.fix ?? error.message}`,
  );
  return circuit;
}

/** Closes the circuit after a probe succeeded; logs how long it was open. */
export async function closeCircuit(deps: ReconcilerDeps): Promise<void> {
  const closed = await deps.store.circuit.close();
  if (!closed) return;
  const now = (deps.now ?? Date.now)();
  deps.logger?.info(
    { cause: closed.cause, openForMs: now - closed.openedAt, probes: closed.probes + 1 },
    'reconciler circuit closed: the probe succeeded; polling resumes',
  );
}
