import { fileURLToPath } from 'node:url';

/**
 * What the demo runs under, in one place for the single-upstream and the two-upstream demo: the
 * simulator's fixtures, faults and profile settings, and the service's settings.
 */

/** The demo fixture, found from src/demo and dist/demo alike. */
export const DEMO_FIXTURE = fileURLToPath(new URL('../../fixtures/demo.json', import.meta.url));
export const DEMO_KEY = 'sim_key_demo_M0001';
export const DEMO_SECRET = 'sim_secret_demo_M0001';

/** The realistic mix of faults the demo runs under (docs/simulator.md, "Faults"). */
export const DEMO_FAULTS = {
  webhook_drop: 0.25,
  webhook_duplicate: 0.2,
  webhook_reorder: 0.2,
  webhook_bad_signature: 0.1,
  create_response_delay_ms: 300,
  create_drop_response: 0.05,
};

/**
 * The realistic profile's defaults (docs/simulator.md, "Profiles and time scale") except the
 * stuck orders: more of them (5 %) and stuck for 10 to 15 simulated minutes instead of hours,
 * so that the demo shows them and still ends in seconds.
 */
export const DEMO_REALISTIC = {
  stuck_share: 0.05,
  stuck_duration: { median_s: 600, p99_s: 900 },
};

/** The simulator's rate limit and window, the same as the service's below. */
export const DEMO_SIM_RATE = { rateLimit: 60, rateWindowMs: 6000 } as const;

/**
 * The service's settings for a demo whose private Redis is `redisUrl` and whose files are in
 * `dir`: everything on free ports, silent, ten times faster than production defaults (rate window
 * 6 s, passes every second). The upstreams' settings are the caller's.
 */
export function demoServiceEnvironment(redisUrl: string, dbPath: string): Record<string, string> {
  return {
    REDIS_URL: redisUrl,
    H2H_DB_PATH: dbPath,
    PORT: '0',
    H2H_RECEIVER_METRICS_PORT: '0',
    LOG_LEVEL: 'silent',
    H2H_RATE_LIMIT: String(DEMO_SIM_RATE.rateLimit),
    H2H_RATE_WINDOW_MS: String(DEMO_SIM_RATE.rateWindowMs),
    H2H_HEADERS_TIMEOUT_MS: '2000',
    RECONCILE_EVERY_S: '1',
    RECONCILE_FIRST_POLL_DELAY_S: '3',
    RECONCILE_BACKOFF_S: '2,4,10',
    // The demo loses a quarter of all webhooks for good, far more than any real upstream, and
    // lasts seconds: the audit re-reads a SUCCESS after 5 s (not a day), so a refund whose
    // webhook was lost is found within the demo.
    RECONCILE_AUDIT_EVERY_S: '5',
    ADMIN_PORT: '0',
    API_PORT: '0',
  };
}

/**
 * The two-upstream demo's second supplier (docs/simulator.md, "Several upstreams"): cheaper than
 * the demo fixture's, a quarter of its ordinary orders FAILED, 150,000 of balance.
 */
export const BETA_FIXTURE = fileURLToPath(new URL('../../fixtures/beta.json', import.meta.url));
export const BETA_KEY = 'sim_key_beta_B0001';
export const BETA_SECRET = 'sim_secret_beta_B0001';
