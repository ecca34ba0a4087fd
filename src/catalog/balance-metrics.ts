import { Gauge, type Registry } from 'prom-client';
import type { BalanceLedger } from '../store/balance.js';

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
 *   epoch; 0 while there is none (always 0 when that threshold is 0). The alert's input.
 * The worker process that refreshes the catalogs registers them once, in the registry its admin
 * server exposes. A store that does not answer (closing, busy) keeps the last figures.
 */
export function registerBalanceMetrics(registry: Registry, balance: BalanceLedger): void {
  const registers = [registry];
  new Gauge({
    name: 'h2h_balance',
    help: 'The upstream’s accounted balance now: its last profile balance, minus the orders debited plus those credited since.',
    labelNames: ['upstream'] as const,
    registers,
    async collect() {
      let views: Awaited<ReturnType<BalanceLedger['view']>>['upstreams'];
      try {
        views = (await balance.view()).upstreams;
      } catch {
        return; // the database is closing or busy: keep the last figures
      }
      for (const view of views)
        if (view.balance !== null) this.set({ upstream: view.upstream }, view.balance);
    },
  });
  new Gauge({
    name: 'h2h_balance_low',
    help: 'Whether the upstream’s accounted balance is under BALANCE_LOW_THRESHOLD (1), the threshold of balance.low; 0 when it is not or the threshold is 0.',
    labelNames: ['upstream'] as const,
    registers,
    async collect() {
      let views: Awaited<ReturnType<BalanceLedger['view']>>['upstreams'];
      try {
        views = (await balance.view()).upstreams;
      } catch {
        return;
      }
      for (const view of views) {
        if (view.balance === null) continue;
        const low = balance.lowThreshold !== 0 && view.balance < balance.lowThreshold;
        this.set({ upstream: view.upstream }, low ? 1 : 0);
      }
    },
  });
  new Gauge({
    name: 'h2h_balance_drift',
    help: 'The upstream’s balance drift at its last profile read: its profile balance minus the balance h2h-sync expected, in the balance’s currency (above 0: money came back unlearnt; below 0: a debit unlearnt).',
    labelNames: ['upstream'] as const,
    registers,
    async collect() {
      let drifts: Awaited<ReturnType<BalanceLedger['drifts']>>;
      try {
        drifts = await balance.drifts();
      } catch {
        return;
      }
      for (const drift of drifts) this.set({ upstream: drift.upstream }, drift.drift);
    },
  });
  new Gauge({
    name: 'h2h_balance_drift_since_timestamp_seconds',
    help: 'When the upstream’s balance drift episode began (its first profile read past BALANCE_DRIFT_THRESHOLD beyond what creates in doubt explain), in seconds since the epoch; 0 while there is none.',
    labelNames: ['upstream'] as const,
    registers,
    async collect() {
      let drifts: Awaited<ReturnType<BalanceLedger['drifts']>>;
      try {
        drifts = await balance.drifts();
      } catch {
        return;
      }
      for (const drift of drifts)
        this.set(
          { upstream: drift.upstream },
          drift.drift_since === null ? 0 : Date.parse(drift.drift_since) / 1000,
        );
    },
  });
}
