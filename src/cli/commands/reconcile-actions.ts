import { reconcilerSettings } from '../../config/config.js';
import {
  type PassStop,
  type ReconcilePassSummary,
  runReconcilePass,
} from '../../reconciler/reconcile-pass.js';
import { reconcileNames } from '../../reconciler/reconcile-queue.js';
import { RedisLease } from '../../shared/redis-lease.js';
import { withClaims } from '../../store/order-store.js';
import { openContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { printPublicJson, renderTable, runAction } from '../output.js';
import { createProgressLine } from '../progress.js';

function budgetLine(summary: ReconcilePassSummary): string {
  const window = summary.budget
    ? `; window ${summary.budget.used}/${summary.budget.limit} (polls ${summary.budget.poll}/${summary.budget.pollCeiling}, audit ${summary.budget.audit})`
    : '';
  return `${summary.calls} call${summary.calls === 1 ? '' : 's'}${window}`;
}

const STOP_TEXT: Record<PassStop, (s: ReconcilePassSummary) => string> = {
  done: () => 'no order left due',
  pass_size: (s) => `pass size reached; ${s.dueAfter} still due, the next pass takes them first`,
  budget: (s) =>
    `the poll share of the rate budget is spent for now (a slot frees in ${Math.ceil((s.retryAfterMs ?? 0) / 1000)} s); ` +
    `${s.dueAfter} still due, the next pass takes them first`,
  locked: (s) => `another reconciliation pass is running (${s.lockHolder ?? 'unknown holder'}); nothing done`,
  lock_lost: () => 'the pass lock expired (the process stalled); stopped before the next order',
  unauthorized: (s) => `stopped, circuit open: ${s.error?.message}`,
  base_url: (s) => `stopped, circuit open: ${s.error?.message}`,
  rate_limited: (s) => `stopped: the upstream answered 429 — ${s.error?.fix ?? ''}`,
  upstream_failing: (s) =>
    `stopped, circuit open: the upstream keeps failing (${s.error?.code}); the next pass probes it first`,
};

/**
 * Exit code by how the pass ended: 0 when it did its work (or the budget ended it), 2 when the
 * configuration must be fixed (the key, the whitelist, the base URL), 1 otherwise.
 */
function exitCodeFor(stoppedBy: PassStop): number {
  if (stoppedBy === 'done' || stoppedBy === 'budget' || stoppedBy === 'pass_size') return EXIT.ok;
  return stoppedBy === 'unauthorized' || stoppedBy === 'base_url' ? EXIT.config : EXIT.failed;
}

/**
 * `reconcile --once [--upstream NAME]`: one reconciliation pass in this process, of one
 * upstream's orders with its client, budget and pass lock (default: the default upstream).
 */
export const reconcile = async (flags: { once: boolean; upstream?: string; json?: boolean }) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      const settings = reconcilerSettings(context.config);
      const upstream = await context.openUpstream(flags.upstream ?? 'default');
      const store = withClaims(context.store!, settings, upstream.name);
      const progress = createProgressLine(process.stderr, { enabled: !flags.json });
      const summary = await runReconcilePass(
        { store, client: upstream.client, settings },
        {
          lock: new RedisLease(upstream.redis, { key: reconcileNames(upstream.name).lockKey }),
          budget: upstream.budget,
          trigger: 'cli',
          onProgress: (p) =>
            progress.update(
              p.attempted,
              p.total,
              `checked ${p.checked}, changed ${p.changed}, errors ${p.errors}`,
            ),
        },
      );
      progress.done();
      if (flags.json) {
        printPublicJson(summary);
      } else {
        process.stdout.write(
          `${renderTable(
            [summary],
            [
              { header: 'Checked', cell: (s) => s.checked },
              { header: 'Changed', cell: (s) => s.changed },
              { header: 'Still open', cell: (s) => s.stillOpen },
              { header: 'Stuck', cell: (s) => s.stuck },
              { header: 'Errors', cell: (s) => s.errors },
              { header: 'Audited', cell: (s) => `${s.audited} (${s.auditFound} changed)` },
              { header: 'Budget used', cell: budgetLine },
            ],
          )}\n`,
        );
        const line = STOP_TEXT[summary.stoppedBy](summary);
        if (exitCodeFor(summary.stoppedBy) === EXIT.ok) process.stdout.write(`${line}\n`);
        else process.stderr.write(`error: ${line}\n`);
      }
      process.exitCode = exitCodeFor(summary.stoppedBy);
    } finally {
      await context.close();
    }
  });
};
