// A child process for two-processes.test.ts: a whole reconciler (scheduler, pass worker, poll
// requests) on the shared SQLite file and Redis, plus a loop of passes run now (as an operator's
// `reconcile --once` would), so the two processes contend for the pass lock all the time.
// Protocol: the parent sends a ReconcilerProcessConfig; the child answers 'ready'; on 'stop' it
// closes and answers with every pass it ran or skipped.
import { Redis } from 'ioredis';
import type { ReconcilerSettings } from '../../src/config/config.js';
import { RateBudget, type RateBudgetOptions } from '../../src/rate-budget/rate-budget.js';
import type { ReconcilePassSummary } from '../../src/reconciler/reconcile-pass.js';
import { startReconciler } from '../../src/reconciler/reconciler.js';
import { openDatabase } from '../../src/store/database.js';
import { openOrderStore } from '../../src/store/order-store.js';
import { UpstreamClient } from '../../src/upstream/client.js';

export interface ReconcilerProcessConfig {
  dbPath: string;
  redisUrl: string;
  baseUrl: string;
  apiKey: string;
  budget: Omit<RateBudgetOptions, 'redis' | 'apiKey'>;
  settings: ReconcilerSettings;
  /** Pause between two passes of the extra loop. */
  loopPauseMs: number;
}

export interface ReconcilerProcessReport {
  pid: number;
  passes: ReconcilePassSummary[];
}

process.once('message', async (config: ReconcilerProcessConfig) => {
  const db = openDatabase({ path: config.dbPath });
  const store = openOrderStore(db, config.settings);
  const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 1 });
  const budget = new RateBudget({ redis, apiKey: config.apiKey, ...config.budget });
  const client = new UpstreamClient({ baseUrl: config.baseUrl, apiKey: config.apiKey, budget });
  const passes: ReconcilePassSummary[] = [];
  const reconciler = await startReconciler({
    settings: config.settings,
    store,
    client,
    budget,
    redisUrl: config.redisUrl,
    onPass: (summary) => passes.push(summary),
  });

  let looping = true;
  const loop = (async () => {
    while (looping) {
      await reconciler.runPassNow('loop');
      await new Promise((resolve) => setTimeout(resolve, config.loopPauseMs));
    }
  })();

  process.once('message', async () => {
    looping = false;
    await loop;
    await reconciler.close();
    await client.close();
    redis.disconnect();
    db.close();
    const report: ReconcilerProcessReport = { pid: process.pid, passes };
    process.send!(report, () => process.disconnect());
  });
  process.send!('ready');
});
