import { randomUUID } from 'node:crypto';
import type { BudgetUsage, RateBudget } from '../rate-budget/rate-budget.js';
import type { RedisLease } from '../shared/redis-lease.js';
import type { ClaimedOrder } from '../store/order-claims.js';
import type { CircuitCause, OpenCircuit } from '../store/upstream-circuit.js';
import { CIRCUIT_OPENS_AFTER, closeCircuit, openCircuit, probeFailed, probeUpstream } from './circuit.js';
import { relearnPace } from './learn-pace.js';
import { type PollError, pollClaimedOrder, type ReconcilerDeps } from './poll-order.js';

/**
 * Why a pass ended:
 * - `done`: no due order left;
 * - `pass_size`: it polled `passSize` orders;
 * - `budget`: the poll share of the rate budget is spent for now; the rest wait;
 * - `locked`: another pass was running, so this one did nothing;
 * - `lock_lost`: its lock expired (the process froze): it stopped before the next order;
 * - `rate_limited`: the upstream answered 429 although the budget allowed the call;
 * - a {@link CircuitCause} (`unauthorized`, `base_url`, `upstream_failing`): the circuit is open, because
 *   this pass opened it or its probe failed; no order is polled until a probe succeeds.
 */
export type PassStop =
  | 'done'
  | 'pass_size'
  | 'budget'
  | 'locked'
  | 'lock_lost'
  | 'rate_limited'
  | CircuitCause;

/** What a pass did, for logs, the CLI table and `--json`. */
export interface ReconcilePassSummary {
  passId: string;
  /** What started it: `schedule`, `continue`, `cli` … */
  trigger: string;
  /** When the pass began (with the lock held) and ended (before releasing it), in ms. */
  startedAt: number;
  finishedAt: number;
  /** Orders polled with an answer (a 404 included). */
  checked: number;
  /** Of those, orders the answer changed: each is a lost or late webhook. */
  changed: number;
  /** Orders whose create was repeated with the same partner_ref (after a 404, or blocked). */
  resubmitted: number;
  /** Settled SUCCESS orders the audit re-read on idle capacity (with an answer). */
  audited: number;
  /** Of those, orders the read changed: refunds (or late serials) whose webhooks were all lost. */
  auditFound: number;
  /** Checked orders still open (not final, or SUCCESS without its serial) after the pass. */
  stillOpen: number;
  /** Stuck orders in the store after the pass (open, older than the maximum age). */
  stuck: number;
  /** Polls that failed (5xx, no answer, 429, 401, an unreadable answer). */
  errors: number;
  /** 404s for orders the upstream had confirmed. */
  anomalies: number;
  /** Upstream calls this pass made (polls, repeated creates, the client's retries). */
  calls: number;
  /** The shared budget's window after the pass, when a budget was given. */
  budget: BudgetUsage | null;
  /** Orders due for a poll when the pass ended (the ones the next pass takes first). */
  dueAfter: number;
  stoppedBy: PassStop;
  /** For `budget`: when a poll slot frees, in ms from the end of the pass. */
  retryAfterMs?: number;
  /** The error that stopped the pass (`rate_limited` or a circuit cause), with its fix. */
  error?: PollError;
  /** The probe this pass made first (the circuit was open), or undefined when it made none. */
  probe?: 'ok' | 'failed';
  /** The circuit after the pass: null while the reconciler may call the upstream. */
  circuit: OpenCircuit | null;
  /** For `locked`: who holds the lock. */
  lockHolder?: string | null;
}

/** Progress of a pass, reported after each order. */
export interface PassProgress {
  /** Orders claimed so far. */
  attempted: number;
  /** Orders due when the pass began, at most the pass size: the pass's likely length. */
  total: number;
  checked: number;
  changed: number;
  errors: number;
}

export interface RunPassOptions {
  /** Makes the pass one at a time across processes. Default: none (the caller guarantees it). */
  lock?: RedisLease;
  /** Read for the summary's budget line. Default: none. */
  budget?: RateBudget;
  /** Default: `manual`. */
  trigger?: string;
  /** Stops the pass before the next order. */
  signal?: AbortSignal;
  onProgress?: (progress: PassProgress) => void;
}

/**
 * One reconciliation pass: under the pass lock (when given), learns the upstream's pace and
 * writes its first-poll plan of each product ({@link relearnPace}), probes the upstream first when the
 * circuit is open or blocked orders wait (one `GET /profile`: a success closes the circuit, a
 * failure opens it or keeps it open and ends the pass), then claims
 * due orders one at a time, longest-due first (`claimDueForPoll`), and polls each with
 * {@link pollClaimedOrder}, until none is due, `passSize` orders were taken, or polling must stop
 * for a cause that concerns every order: the poll share of the budget is spent, 429, or the
 * circuit opens (401/403, or {@link CIRCUIT_OPENS_AFTER} different orders failing in a row).
 * An order that got no answer (5xx, none) goes on its own backoff, behind the others; one that
 * could not be polled for a cause of every order keeps its place (its claim is released at the
 * end of the pass). When no order is left due, the audit re-reads settled SUCCESS orders on idle
 * capacity only. Never throws for upstream trouble: the summary says why it ended.
 */
export async function runReconcilePass(
  deps: ReconcilerDeps,
  options: RunPassOptions = {},
): Promise<ReconcilePassSummary> {
  const now = deps.now ?? Date.now;
  const passId = randomUUID();
  const trigger = options.trigger ?? 'manual';

  const held = options.lock ? await options.lock.acquire() : undefined;
  // Taken once the lock is held, and `finishedAt` before it is released: the times of two
  // passes never overlap.
  const startedAt = now();
  if (options.lock && !held) {
    const summary = emptySummary(passId, trigger, startedAt, now());
    summary.stoppedBy = 'locked';
    summary.lockHolder = await options.lock.holder().catch(() => null);
    summary.dueAfter = (await deps.store.queries.countByStatus(now(), deps.store.claims.upstream)).dueForPoll;
    deps.logger?.debug({ passId, holder: summary.lockHolder }, 'another reconciliation pass is running');
    deps.metrics?.countPass('locked');
    return summary;
  }

  try {
    const signals = [options.signal, held?.signal].filter((s): s is AbortSignal => s !== undefined);
    // First the first-poll plans, from what the store recorded since the last pass: the orders
    // this pass reschedules, and every write after it, follow the newest pace.
    await relearnPace(deps.store, deps.logger);
    return await pollDueOrders(deps, { ...options, passId, trigger, startedAt, signals });
  } finally {
    await held?.release();
  }
}

/**
 * The audit (docs/reconciler.md, "The audit"): once no order is due, poll capacity that neither
 * creation nor due polls use re-reads settled SUCCESS orders, least recently checked first
 * (`claimForAudit`), to find refunds (and late serials) whose webhooks were all lost. Each read
 * draws from the budget's `audit` priority, which grants only while the window is idle, so the
 * audit takes nothing from a busy budget; it stops as soon as an order is due again, at the
 * first read the budget refuses, and at the first failure (a failing upstream is not worth idle
 * capacity). A 401 opens the circuit as for a poll.
 */
async function auditOnIdleCapacity(
  deps: ReconcilerDeps,
  pass: { startedAt: number; signals: AbortSignal[] },
  summary: ReconcilePassSummary,
  kept: ClaimedOrder[],
  attempted: number,
): Promise<void> {
  const { store, settings } = deps;
  const now = deps.now ?? Date.now;
  while (attempted < settings.passSize) {
    if (pass.signals.some((s) => s.aborted)) {
      summary.stoppedBy = 'lock_lost';
      return;
    }
    // Due polls first, always: an order that became due meanwhile ends the audit.
    if ((await store.claims.dueForPoll(1, now())).length > 0) return;
    const order = await store.claims.claimForAudit({ checkedBefore: pass.startedAt });
    if (!order) return;
    attempted += 1;
    let result: Awaited<ReturnType<typeof pollClaimedOrder>>;
    try {
      result = await pollClaimedOrder(deps, order, { audit: true });
    } catch (error) {
      kept.push(order);
      throw error;
    }
    summary.calls += result.calls;
    if (result.kind === 'polled') {
      summary.audited += 1;
      if (result.changed) summary.auditFound += 1;
      if (result.anomaly) summary.anomalies += 1;
      continue;
    }
    kept.push(order);
    if (result.reason === 'budget') return; // no idle capacity: the audit waits, nothing else does
    summary.errors += 1;
    if (result.reason === 'unauthorized') {
      await openCircuit(deps, result.reason, result.error);
      summary.stoppedBy = result.reason;
      summary.error = result.error;
    } else if (result.reason === 'rate_limited') {
      summary.stoppedBy = 'rate_limited';
      summary.error = result.error;
    }
    return;
  }
}

function emptySummary(
  passId: string,
  trigger: string,
  startedAt: number,
  finishedAt: number,
): ReconcilePassSummary {
  return {
    passId,
    trigger,
    startedAt,
    finishedAt,
    checked: 0,
    changed: 0,
    resubmitted: 0,
    audited: 0,
    auditFound: 0,
    stillOpen: 0,
    stuck: 0,
    errors: 0,
    anomalies: 0,
    calls: 0,
    budget: null,
    dueAfter: 0,
    stoppedBy: 'done',
    circuit: null,
  };
}

async function pollDueOrders(
  deps: ReconcilerDeps,
  pass: RunPassOptions & { passId: string; trigger: string; startedAt: number; signals: AbortSignal[] },
): Promise<ReconcilePassSummary> {
  const { store, settings, logger, metrics } = deps;
  const now = deps.now ?? Date.now;
  const summary = emptySummary(pass.passId, pass.trigger, pass.startedAt, pass.startedAt);
  const atStart = await store.queries.countByStatus(now(), store.claims.upstream);
  const total = Math.min(settings.passSize, atStart.dueForPoll);
  // Orders that could not be polled for a cause of every order: released at the end, so this
  // pass does not take them again and the next one takes them first.
  const kept: ClaimedOrder[] = [];
  let attempted = 0;
  let failuresInARow = 0;

  const stop = (stoppedBy: PassStop, error?: PollError) => {
    summary.stoppedBy = stoppedBy;
    if (error) summary.error = error;
  };

  try {
    // A blocked order is submitted again only once a probe shows the configuration works.
    if ((await store.circuit.state()) || atStart.bySubmissionState.blocked > 0) {
      const probe = await probeUpstream(deps);
      summary.calls += probe.calls;
      if (probe.ok) {
        summary.probe = 'ok';
        await closeCircuit(deps);
      } else if (probe.reason === 'budget') {
        stop('budget');
        if (probe.retryAfterMs !== undefined) summary.retryAfterMs = probe.retryAfterMs;
      } else {
        summary.probe = 'failed';
        summary.errors += 1;
        if (probe.reason === 'rate_limited') stop('rate_limited', probe.error);
        else if (!(await store.circuit.state())) {
          await openCircuit(deps, probe.reason, probe.error);
          stop(probe.reason, probe.error);
        } else {
          await probeFailed(deps, probe.reason, probe.error);
          stop(probe.reason, probe.error);
        }
      }
    }

    while (summary.stoppedBy === 'done') {
      if (pass.signals.some((s) => s.aborted)) {
        stop('lock_lost');
        break;
      }
      if (attempted >= settings.passSize) {
        stop('pass_size');
        break;
      }
      // Due by the pass's start: an order this pass polled and rescheduled is not taken twice.
      const [order] = await store.claims.claimDueForPoll(1, { dueBy: pass.startedAt });
      if (!order) break;
      attempted += 1;

      let result: Awaited<ReturnType<typeof pollClaimedOrder>>;
      try {
        result = await pollClaimedOrder(deps, order);
      } catch (error) {
        kept.push(order);
        throw error;
      }
      summary.calls += result.calls;
      if (result.kind === 'polled') {
        failuresInARow = 0;
        if (order.nextPollAt !== null) metrics?.observePollLateness((now() - order.nextPollAt) / 1000);
        summary.checked += 1;
        if (result.changed) summary.changed += 1;
        if (result.outcome === 'resubmitted') summary.resubmitted += 1;
        if (result.outcome === 'invalid_answer') summary.errors += 1;
        if (result.anomaly) summary.anomalies += 1;
        if (result.order.nextPollAt !== null) summary.stillOpen += 1;
      } else if (result.reason === 'claimed') {
        // Its claim ran out while its repeated create waited: another process holds it now.
      } else if (result.reason === 'budget') {
        kept.push(order);
        stop('budget');
        if (result.retryAfterMs !== undefined) summary.retryAfterMs = result.retryAfterMs;
      } else if (result.reason === 'rate_limited') {
        kept.push(order);
        summary.errors += 1;
        stop('rate_limited', result.error);
      } else if (result.reason === 'unauthorized' || result.reason === 'base_url') {
        kept.push(order);
        summary.errors += 1;
        await openCircuit(deps, result.reason, result.error);
        stop(result.reason, result.error);
      } else {
        // This order got no answer: its own backoff, so it never holds up the orders behind it.
        await store.claims.recordFailedPoll(order.partnerRef, { claim: order.claim });
        summary.errors += 1;
        failuresInARow += 1;
        if (failuresInARow >= CIRCUIT_OPENS_AFTER) {
          await openCircuit(deps, 'upstream_failing', result.error);
          stop('upstream_failing', result.error);
        }
      }
      pass.onProgress?.({
        attempted,
        total: Math.max(total, attempted),
        checked: summary.checked,
        changed: summary.changed,
        errors: summary.errors,
      });
    }

    if (summary.stoppedBy === 'done') await auditOnIdleCapacity(deps, pass, summary, kept, attempted);
  } finally {
    for (const order of kept) await store.claims.releaseClaim(order.partnerRef, order.claim);
  }

  const counts = await store.queries.countByStatus(now(), store.claims.upstream);
  summary.stuck = counts.stuck;
  summary.dueAfter = counts.dueForPoll;
  metrics?.setStuck(counts.stuck);
  summary.circuit = await store.circuit.state();
  summary.budget = pass.budget ? await pass.budget.used().catch(() => null) : null;
  summary.finishedAt = now();
  metrics?.countPass(summary.stoppedBy);

  const line = {
    passId: summary.passId,
    trigger: summary.trigger,
    checked: summary.checked,
    changed: summary.changed,
    audited: summary.audited,
    auditFound: summary.auditFound,
    errors: summary.errors,
    stoppedBy: summary.stoppedBy,
    dueAfter: summary.dueAfter,
    durationMs: summary.finishedAt - summary.startedAt,
  };
  if (summary.stoppedBy === 'unauthorized' || summary.stoppedBy === 'base_url') {
    logger?.error(
      { ...line, error: summary.error },
      `reconciliation pass stopped: ${summary.error?.message}`,
    );
  } else if (summary.stoppedBy === 'rate_limited' || summary.stoppedBy === 'upstream_failing') {
    logger?.warn(
      { ...line, error: summary.error },
      `reconciliation pass stopped early (${summary.stoppedBy}); due orders keep their place`,
    );
  } else if (summary.checked > 0 || summary.audited > 0 || summary.stoppedBy !== 'done') {
    logger?.info(line, 'reconciliation pass finished');
  } else {
    logger?.debug(line, 'reconciliation pass: nothing due');
  }
  return summary;
}
