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
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const root = import.meta.dirname;
const env = process.env;

/**
 * The settings schema of the build (src/config/config.ts), loaded synchronously: pm2 reads
 * `apps` as soon as require() returns, so the file cannot await an import().
 */
function builtConfigModule() {
  const path = join(root, 'dist', 'config', 'config.js');
  if (!existsSync(path)) {
    throw new Error(
      'ecosystem.config.js: dist/config/config.js is missing: run `npm run build` first (pm2 runs the compiled code)',
    );
  }
  return createRequire(import.meta.url)(path);
}

const { SETTING_NAMES, SIMULATOR_BASE_URL, loadConfig } = builtConfigModule();

// The same validation as every app's start-up: a bad value stops `pm2 start` here, naming the
// variable, instead of leaving the apps in a restart loop.
const config = loadConfig(env);
const settings = config.settings;

/**
 * No REDIS_URL (nor sentinels) where pm2 runs: the ecosystem runs a private redis-server of its
 * own, on the address every process and CLI command uses by default (REDIS_URL's default follows
 * H2H_PRIVATE_REDIS_PORT), so `h2h-sync status` finds it without a setting. With
 * H2H_REDIS_SENTINELS, REDIS_URL only carries credentials and scheme: it is passed on as set.
 */
const privateRedis = !env.REDIS_URL && !env.H2H_REDIS_SENTINELS;
const redisUrl = privateRedis ? config.redisUrl : (env.REDIS_URL ?? '');

/**
 * An env block naming every setting: the value of the environment pm2 runs in, else `defaults`,
 * else '' (which the config reads as "not set": the schema's default, README "Settings").
 * pm2 merges `env_production` over `env`, so each block names every variable.
 */
function settingsEnv(defaults) {
  return Object.fromEntries(
    SETTING_NAMES.map((name) => [
      name,
      env[name] !== undefined && env[name] !== '' ? env[name] : (defaults[name] ?? ''),
    ]),
  );
}

const development = settingsEnv({
  REDIS_URL: redisUrl,
  H2H_BASE_URL: SIMULATOR_BASE_URL,
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
  // No `time: true`: pino stamps every line itself (`time`), and under pm2 stdout is not a
  // terminal, so lines are JSON (LOG_FORMAT auto); a pm2 prefix would be a second timestamp.
  // A process that fails at start-up (a missing or bad setting) exits 2 with one line naming
  // the variable; pm2 restarts it, and after 10 restarts that each lived less than 5 s marks it
  // `errored` and stops: `pm2 ls` shows the loop's end, `pm2 logs` the line to fix.
  min_uptime: 5_000,
  max_restarts: 10,
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
            '--port', String(settings.H2H_PRIVATE_REDIS_PORT),
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
    instances: settings.H2H_RECEIVER_INSTANCES,
    // Above the drain (H2H_SHUTDOWN_TIMEOUT_MS), or pm2 kills a receiver mid-request.
    kill_timeout: settings.H2H_SHUTDOWN_TIMEOUT_MS + 5_000,
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
    // Above the worker's own deadline: its stop (H2H_WORKER_SHUTDOWN_TIMEOUT_MS) and the store's close.
    kill_timeout: settings.H2H_WORKER_SHUTDOWN_TIMEOUT_MS + 5_000,
  },
  {
    ...shared,
    name: 'h2h-api',
    args: 'api',
    // The shop API (docs/api.md) on API_HOST:API_PORT; reads the store and writes tokens' last use.
    exec_mode: 'fork',
    instances: 1,
    // Above its drain (H2H_SHUTDOWN_TIMEOUT_MS), or pm2 kills it mid-request.
    kill_timeout: settings.H2H_SHUTDOWN_TIMEOUT_MS + 5_000,
  },
];

if (privateRedis) mkdirSync(join(root, 'var', 'redis'), { recursive: true });
