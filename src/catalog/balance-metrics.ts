import type { Registry } from 'prom-client';
import type { PublicBalanceDrift, PublicUpstreamBalance } from '../catalog/public-catalog.js';
import { scrapedGauges } from '../shared/scrape-read.js';
import type { BalanceLedger } from '../store/balance.js';

/** What the balance gauges show of one upstream: its balance now and its drift at the last read. */
interface UpstreamFigures {
  balance: PublicUpstreamBalance;
  drift: PublicBalanceDrift | undefined;
}

/**
 * The balance's Prometheus gauges (docs/operations.md, "Balance drift"), read from the store at
 * each scrape, per upstream (`upstream` label), for every upstream whose profile was read:
 * - `h2h_balance{upstream}`: the accounted balance now (GET /v1/balance's `balance`);
 * - `h2h_balance_low{upstream}`: 1 while it is under BALANCE_LOW_THRESHOLD (the `balance.low`
 *   threshold), else 0; always 0 when that threshold is 0 (off);
 * - `h2h_balance_drift{upstream}`: the drift at its last profile read, profile minus expected
 *   balance, in the balance's currency (docs/api.md, "Balance drift");
 * - `h2h_balance_drift_since_timestamp_seconds{upstream}`: when its drift episode began (the first
 *   read past BALANCE_DRIFT_THRESHOLD, beyond what creates in doubt explain), in seconds since the
 *   epoch; 0 while there is none (always 0 when that threshold is 0). The drift alert's input.
 * The worker process that refreshes the catalogs registers them once, in the registry its admin
 * server exposes. A store that does not answer (closing, busy) keeps the last figures.
 */
export function registerBalanceMetrics(registry: Registry, balance: BalanceLedger): void {
  let last: UpstreamFigures[] = [];
  const read = async () => {
    try {
      const [{ upstreams }, drifts] = await Promise.all([balance.view(), balance.drifts()]);
      last = upstreams
        .filter((view) => view.balance !== null)
        .map((view) => ({ balance: view, drift: drifts.find((d) => d.upstream === view.upstream) }));
    } catch {
      // the database is closing or busy: keep the last figures
    }
    return last;
  };
  const scraped = scrapedGauges(registry, read);
  const gauge = (name: string, help: string, figureOf: (figures: UpstreamFigures) => number | undefined) =>
    scraped(name, help, ['upstream'], (g, figures) => {
      const value = figureOf(figures);
      if (value !== undefined) g.set({ upstream: figures.balance.upstream }, value);
    });
  gauge(
    'h2h_balance',
    'The upstream’s accounted balance now: its last profile balance, minus the orders debited plus those credited since.',
    ({ balance: view }) => view.balance ?? undefined,
  );
  gauge(
    'h2h_balance_low',
    'Whether the upstream’s accounted balance is under BALANCE_LOW_THRESHOLD (1), the threshold of balance.low; 0 when it is not or the threshold is 0.',
    ({ balance: view }) => (balance.lowThreshold !== 0 && (view.balance ?? 0) < balance.lowThreshold ? 1 : 0),
  );
  gauge(
    'h2h_balance_drift',
    'The upstream’s balance drift at its last profile read: its profile balance minus the balance h2h-sync expected, in the balance’s currency (above 0: money came back unlearnt; below 0: a debit unlearnt).',
    ({ drift }) => drift?.drift,
  );
  gauge(
    'h2h_balance_drift_since_timestamp_seconds',
    'When the upstream’s balance drift episode began (its first profile read past BALANCE_DRIFT_THRESHOLD beyond what creates in doubt explain), in seconds since the epoch; 0 while there is none.',
    ({ drift }) =>
      drift === undefined ? undefined : drift.drift_since === null ? 0 : Date.parse(drift.drift_since) / 1000,
  );
}
