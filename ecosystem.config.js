// pm2 ecosystem of h2h-sync (docs/deployment.md). Runs the compiled code: `npm run build` first.
//
//   pm2 start ecosystem.config.js                    # development: simulator base URL by default
//   pm2 start ecosystem.config.js --env production   # nothing but the environment and the defaults
//   pm2 reload ecosystem.config.js --update-env      # zero-downtime reload of the receivers
//
// pm2 7 loads this file with require(): an ES module (this package is "type": "module") loads
// only on Node >= 20.19 (require(esm)), and pm2 reads the named export `apps`, not a default one.
// Secrets (H2H_API_KEY, H2H_API_SECRET, ADMIN_PASSWORD) are never written here: they come from
// the environment `pm2 start` runs in.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const root = import.meta.dirname;

/** Every variable the apps read: the settings schema of src/config/config.ts (a test keeps them in step). */
export const SETTINGS = [
  'H2H_BASE_URL',
  'H2H_API_KEY',
  'H2H_API_SECRET',
  'H2H_AUTH_STYLE',
  'H2H_CONNECT_TIMEOUT_MS',
  'H2H_HEADERS_TIMEOUT_MS',
  'H2H_BODY_TIMEOUT_MS',
  'H2H_RETRY_MAX_ATTEMPTS',
  'H2H_RATE_LIMIT',
  'H2H_RATE_WINDOW_MS',
  'H2H_RATE_RESERVE_CREATE',
  'REDIS_URL',
  'H2H_DB_PATH',
  'LOG_LEVEL',
  'HOST',
  'PORT',
  'H2H_WEBHOOK_PATH',
  'H2H_WEBHOOK_TOLERANCE_S',
  'H2H_WEBHOOK_BODY_LIMIT',
  'H2H_TIMESTAMP_HEADER',
  'H2H_SIGNATURE_HEADER',
  'H2H_EVENT_ID_HEADER',
  'H2H_EVENT_TYPE_HEADER',
  'H2H_ENQUEUE_TIMEOUT_MS',
  'H2H_SHUTDOWN_TIMEOUT_MS',
  'H2H_WORKER_CONCURRENCY',
  'H2H_WORKER_BATCH_SIZE',
  'H2H_WORKER_LOCK_DURATION_MS',
  'H2H_WORKER_STALLED_INTERVAL_MS',
  'H2H_WORKER_MAX_STALLED_COUNT',
  'H2H_WORKER_SHUTDOWN_TIMEOUT_MS',
  'RECONCILE_ENABLED',
  'RECONCILE_EVERY_S',
  'RECONCILE_FIRST_POLL_DELAY_S',
  'RECONCILE_BACKOFF_S',
  'RECONCILE_REFUND_WATCH_S',
  'RECONCILE_STUCK_AFTER_H',
  'RECONCILE_PASS_SIZE',
  'RECONCILE_LEASE_S',
  'ADMIN_HOST',
  'ADMIN_PORT',
  'ADMIN_USER',
  'ADMIN_PASSWORD',
  'H2H_RECEIVER_INSTANCES',
  'H2H_PRIVATE_REDIS_PORT',
];

const env = process.env;

/** A whole number from the environment, or `fallback`; anything else stops `pm2 start` with the variable's name. */
function wholeNumber(name, fallback, min) {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) {
    throw new Error(`ecosystem.config.js: ${name}=${JSON.stringify(raw)} must be a whole number >= ${min}`);
  }
  return value;
}

const receiverInstances = wholeNumber('H2H_RECEIVER_INSTANCES', 2, 1);
const privateRedisPort = wholeNumber('H2H_PRIVATE_REDIS_PORT', 6380, 1);
const receiverDrainMs = wholeNumber('H2H_SHUTDOWN_TIMEOUT_MS', 10_000, 1);
// The worker's own deadline is its shutdown timeout plus a second for the store to close.
const workerStopMs = wholeNumber('H2H_WORKER_SHUTDOWN_TIMEOUT_MS', 10_000, 1) + 1_000;

/** No REDIS_URL where pm2 runs: the ecosystem runs a private redis-server of its own. */
const privateRedis = !env.REDIS_URL;
const redisUrl = env.REDIS_URL || `redis://127.0.0.1:${privateRedisPort}`;

/**
 * An env block naming every setting: the value of the environment pm2 runs in, else `defaults`,
 * else '' (which the config reads as "not set": the schema's default, README "Settings").
 * pm2 merges `env_production` over `env`, so each block names every variable.
 */
function settingsEnv(defaults) {
  return Object.fromEntries(
    SETTINGS.map((name) => [
      name,
      env[name] !== undefined && env[name] !== '' ? env[name] : (defaults[name] ?? ''),
    ]),
  );
}

const development = settingsEnv({
  REDIS_URL: redisUrl,
  H2H_BASE_URL: 'http://127.0.0.1:4010/v1/member-api',
  LOG_LEVEL: 'info',
});
development.NODE_ENV = 'development';

const production = settingsEnv({ REDIS_URL: redisUrl });
production.NODE_ENV = 'production';

const shared = {
  cwd: root,
  script: 'dist/cli/main.js',
  autorestart: true,
  // Both signal ready once they take work (process.send('ready')).
  wait_ready: true,
  listen_timeout: 15_000,
  merge_logs: true,
  time: true,
  env: development,
  env_production: production,
};

/** @type {import('pm2').StartOptions[]} */
export const apps = [
  ...(privateRedis
    ? [
        {
          // Started first; the receiver and the worker reconnect until it answers.
          name: 'h2h-redis',
          cwd: root,
          script: 'redis-server',
          interpreter: 'none',
          args: [
            '--port', String(privateRedisPort),
            '--bind', '127.0.0.1',
            '--protected-mode', 'yes',
            '--dir', join(root, 'var', 'redis'),
            '--appendonly', 'yes',
            '--appendfsync', 'everysec',
            '--maxmemory-policy', 'noeviction',
            '--daemonize', 'no',
          ], // biome-ignore format: one flag per line pair reads best
          autorestart: true,
          // SIGINT makes redis-server flush the AOF and exit; give it time.
          kill_timeout: 10_000,
        },
      ]
    : []),
  {
    ...shared,
    name: 'h2h-receiver',
    args: 'receiver',
    // Cluster mode: the instances share PORT (the pm2 master accepts and hands out
    // connections), and `pm2 reload` replaces them one at a time, each new one ready first.
    exec_mode: 'cluster',
    instances: receiverInstances,
    // Above the drain (H2H_SHUTDOWN_TIMEOUT_MS), or pm2 kills a receiver mid-request.
    kill_timeout: receiverDrainMs + 5_000,
  },
  {
    ...shared,
    name: 'h2h-worker',
    args: 'worker',
    // One process: the event worker and the reconciler write the SQLite order store, and a
    // single writer per database file is the safe default (group commits, no SQLITE_BUSY).
    // `pm2 reload` of a fork-mode app is a restart; jobs wait in Redis meanwhile.
    exec_mode: 'fork',
    instances: 1,
    kill_timeout: workerStopMs + 4_000,
  },
];

if (privateRedis) mkdirSync(join(root, 'var', 'redis'), { recursive: true });
