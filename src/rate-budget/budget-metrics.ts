import type { Gauge, Registry } from 'prom-client';
import { withDeadline } from '../shared/deadline.js';
import { scrapedGauges } from '../shared/scrape-read.js';
import type { BudgetUsage, RateBudget } from './rate-budget.js';

/** How long a scrape waits for Redis's answer about one budget: 1 s. */
const BUDGET_READ_TIMEOUT_MS = 1_000;

/** One upstream's budget, as the worker holds it. */
export interface NamedBudget {
  readonly upstream: string;
  readonly budget: Pick<RateBudget, 'used'>;
}

/**
 * Registers, on `registry`, each upstream's shared rate budget as Redis holds it at each scrape
 * (the budget every process draws from, so every worker reports the same figures):
 * `h2h_rate_budget_used{upstream,priority}` (grants in the current rolling window, by `create`,
 * `poll`, `audit`), `h2h_rate_budget_limit{upstream}` (calls allowed per window),
 * `h2h_rate_budget_poll_ceiling{upstream}` (the most polls may use) and
 * `h2h_rate_budget_polls_waiting{upstream}` (1 while a poll was refused within the last two
 * windows: due orders wait for slots). An upstream whose budget Redis does not answer within 1 s
 * has no series at that scrape (`h2h_redis_up` says why).
 */
export function registerBudgetGauges(registry: Registry, budgets: readonly NamedBudget[]): void {
  /** Each upstream's usage, read once per scrape for the four gauges. */
  const scraped = scrapedGauges(registry, () => readUsages(budgets));
  const gauge = (
    name: string,
    help: string,
    labelNames: readonly string[],
    set: (gauge: Gauge, upstream: string, usage: BudgetUsage) => void,
  ) => scraped(name, help, labelNames, (g, [upstream, usage]) => set(g, upstream, usage));
  gauge(
    'h2h_rate_budget_used',
    'Grants of the shared rate budget in the current rolling window, by priority (create, poll, audit).',
    ['upstream', 'priority'],
    (g, upstream, usage) => {
      for (const priority of ['create', 'poll', 'audit'] as const) {
        g.set({ upstream, priority }, usage[priority]);
      }
    },
  );
  gauge(
    'h2h_rate_budget_limit',
    'Calls the upstream allows per rolling window (H2H_RATE_LIMIT).',
    ['upstream'],
    (g, upstream, usage) => g.set({ upstream }, usage.limit),
  );
  gauge(
    'h2h_rate_budget_poll_ceiling',
    'The most grants of a window polls may use: the limit less creation’s reserve.',
    ['upstream'],
    (g, upstream, usage) => g.set({ upstream }, usage.pollCeiling),
  );
  gauge(
    'h2h_rate_budget_polls_waiting',
    '1 while a poll was refused within the last two windows (due orders wait for poll slots), else 0.',
    ['upstream'],
    (g, upstream, usage) => g.set({ upstream }, usage.pollsWaiting ? 1 : 0),
  );
}

/** Each budget's usage that Redis gave within the deadline; the others are left out. */
async function readUsages(budgets: readonly NamedBudget[]): Promise<Map<string, BudgetUsage>> {
  const read = await Promise.allSettled(
    budgets.map(({ budget }) =>
      withDeadline(
        budget.used(),
        BUDGET_READ_TIMEOUT_MS,
        () => new Error(`no answer from Redis within ${BUDGET_READ_TIMEOUT_MS} ms`),
      ),
    ),
  );
  const usages = new Map<string, BudgetUsage>();
  read.forEach((result, i) => {
    if (result.status === 'fulfilled') usages.set(budgets[i]!.upstream, result.value);
  });
  return usages;
}
