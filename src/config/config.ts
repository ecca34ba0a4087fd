import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { notifyVariables } from '../notify/settings.js';
import { DEFAULT_LOG_FORMAT, DEFAULT_LOG_LEVEL, LOG_FORMATS, LOG_LEVELS } from '../observability/defaults.js';
import { DEFAULT_PRIVATE_REDIS_PORT } from '../queue/webhook-queue.js';
import { defaultPollFloor, defaultReservedForCreate } from '../rate-budget/rate-budget.js';
import { budgetVariables } from '../rate-budget/settings.js';
import { receiverVariables } from '../receiver/settings.js';
import { DEFAULT_LOCK_TIMEOUT_MS, DEFAULT_POOL_MAX } from '../store/defaults.js';
import { parseStoreUrl, redactUrl, STORE_URL_PATTERN, sqliteUrl } from '../store/store-url.js';
import { upstreamVariables } from '../upstream/settings.js';
import { workerVariables } from '../worker/settings.js';
import { ConfigError } from './config-error.js';
import { int, LOOPBACK, type SharedSettings } from './variables.js';

/**
 * Every setting of h2h-sync, read once from the environment at start-up and validated here.
 * Each component owns its section in `src/<component>/settings.ts`: its variables (description,
 * default) and the function that turns them into the component's options. This module composes
 * the sections into {@link settingsSchema} (whose order is the README table's: `npm run
 * docs:config`), holds the variables several components share (Redis, the store, logs), the rules
 * that tie variables of different sections together, and secret redaction. Components receive only
 * their own section of {@link Config}; nothing else reads `process.env`.
 *
 * A section module is a leaf: it imports zod and modules that load no package, never this one
 * (every CLI command reads the schema, and one that lists tokens must not load BullMQ, undici,
 * fastify or a database driver: docs/cli.md, "Adding a command").
 */

export { type NotifySettings, notifySettings } from '../notify/settings.js';
export { type ReceiverSettings, receiverSettings, webhookSecrets } from '../receiver/settings.js';
export { SIMULATOR_BASE_URL, type UpstreamSettings, upstreamSettings } from '../upstream/settings.js';
export { type WorkerSettings, workerSettings } from '../worker/settings.js';
export { ConfigError } from './config-error.js';

/**
 * The installation directory (the package root: this file is `src/config/` or `dist/config/`).
 * Defaults that name files are resolved from it, not from the working directory, so a command
 * run elsewhere finds the same store as the deployment.
 */
export const INSTALL_DIR = fileURLToPath(new URL('../..', import.meta.url));

/** Where the order store is when neither H2H_DB_URL nor H2H_DB_PATH is set. */
export const DEFAULT_DB_PATH = join(INSTALL_DIR, 'var', 'h2h-sync.db');

export const settingsSchema = z.object({
  ...upstreamVariables.shape,
  ...budgetVariables.shape,
  REDIS_URL: z
    .url({ protocol: /^rediss?$/ })
    .optional()
    .describe(
      "Redis for the queues and the shared rate budget. Default: the deployment's private Redis, `redis://127.0.0.1:<H2H_PRIVATE_REDIS_PORT>`, the one pm2's ecosystem runs when REDIS_URL is not set, so the CLI finds it too.",
    ),
  H2H_DB_URL: z
    .string()
    .regex(STORE_URL_PATTERN, 'must start with sqlite:, postgres:// or postgresql://')
    .optional()
    .describe(
      'The order store: `sqlite:///absolute/path` or `sqlite:relative/path` (SQLite, the embedded default, one host), or `postgres://user@host:port/db` (PostgreSQL, for several hosts; a password left out is read from `PGPASSWORD`). Default: `sqlite://` + `H2H_DB_PATH`, else `var/h2h-sync.db` in the installation directory, whatever the working directory. Commands that only read refuse to create a SQLite file. A password in it never appears in logs or errors.',
    ),
  H2H_DB_PATH: z
    .string()
    .min(1)
    .optional()
    .describe(
      'SQLite order store file: shorthand for `H2H_DB_URL=sqlite://<absolute path>`; setting both to different stores is refused.',
    ),
  H2H_DB_LOCK_TIMEOUT_MS: int(1)
    .default(DEFAULT_LOCK_TIMEOUT_MS)
    .describe(
      "Longest wait of a store write for another process's write lock (SQLite's `busy_timeout`, PostgreSQL's `lock_timeout`), on timers; past it the write fails and is retried where the caller retries (the event worker's own wait is `H2H_WORKER_STORE_LOCK_WAIT_MS`).",
    ),
  H2H_DB_POOL_MAX: int(1)
    .max(1000)
    .default(DEFAULT_POOL_MAX)
    .describe(
      "PostgreSQL only: connections each process may open to the store. Keep hosts × processes × this under the server's `max_connections` (docs/deployment.md).",
    ),
  LOG_LEVEL: z.enum(LOG_LEVELS).default(DEFAULT_LOG_LEVEL).describe('pino log level.'),
  LOG_FORMAT: z
    .enum(LOG_FORMATS)
    .default(DEFAULT_LOG_FORMAT)
    .describe(
      'How logs are written: `json` (one object a line), `pretty` (pino-pretty, for a person), or `auto`: pretty when the log stream is a terminal, JSON otherwise (under pm2, in files and pipes).',
    ),
  H2H_SHUTDOWN_TIMEOUT_MS: int(1)
    .default(10_000)
    .describe(
      'Longest graceful drain of the receiver and the shop API on SIGINT/SIGTERM before they exit anyway.',
    ),
  ...receiverVariables.shape,
  ...workerVariables.shape,
  ...notifyVariables.shape,
  RECONCILE_ENABLED: z
    .stringbool()
    .default(true)
    .describe(
      'Whether `h2h-sync worker` also reconciles and sends the shop API’s queued orders (needs H2H_BASE_URL and H2H_API_KEY). `false` runs a worker that only applies webhooks and delivers notifications, e.g. an extra event worker.',
    ),
  RECONCILE_EVERY_S: int(1)
    .default(60)
    .describe('Seconds between two reconciliation passes (a BullMQ job scheduler, one pass at a time).'),
  RECONCILE_FIRST_POLL_DELAY_S: int(0)
    .default(30)
    .describe(
      'Seconds after an order is created or changes before its first poll: its webhook is overdue then. Every process that writes orders must use the same value.',
    ),
  RECONCILE_FIRST_POLL_QUANTILE: z.coerce
    .number()
    .min(0)
    .lt(1)
    .default(0.9)
    .describe(
      "Learned first poll: an order is first polled when this share of the product's orders have reached a final state (learned from the webhooks that arrive), plus the usual webhook delivery delay; `0` = always `RECONCILE_FIRST_POLL_DELAY_S`, which also applies until `RECONCILE_PACE_MIN_SAMPLES` are known. Every process that writes orders must use the same value.",
    ),
  RECONCILE_FIRST_POLL_MIN_S: int(0)
    .default(5)
    .describe('Earliest first poll after a creation or change, in seconds, whatever the learned pace says.'),
  RECONCILE_FIRST_POLL_MAX_S: int(1)
    .default(900)
    .describe('Latest first poll after a creation or change, in seconds, whatever the learned pace says.'),
  RECONCILE_PACE_MIN_SAMPLES: int(1)
    .default(50)
    .describe(
      "Final-state webhooks of a product needed before its own pace is used (before that, every product's together, then `RECONCILE_FIRST_POLL_DELAY_S`).",
    ),
  RECONCILE_BACKOFF_S: z
    .string()
    .regex(/^\s*[1-9]\d*\s*(,\s*[1-9]\d*\s*)*$/, 'must be positive whole seconds, comma-separated')
    .default('60,120,300,600,1800,3600')
    .describe(
      'Seconds between polls of an order that does not change, one entry per poll; the last repeats (the cap).',
    ),
  RECONCILE_REFUND_WATCH_S: int(0)
    .optional()
    .describe(
      'Deprecated and ignored: the audit from idle budget (`RECONCILE_AUDIT_WINDOW_D`) replaced the refund watch and finds refunds whose webhooks were all lost. Remove it.',
    ),
  RECONCILE_AUDIT_WINDOW_D: int(0)
    .default(7)
    .describe(
      'Days after it became final that a SUCCESS order is still re-read by the audit, which uses only poll capacity that creation and due polls leave idle, to find refunds (and late serials) whose webhooks were all lost; `0` = no audit.',
    ),
  RECONCILE_AUDIT_EVERY_S: int(1)
    .default(86_400)
    .describe(
      'Seconds before the audit reads the same SUCCESS order again; it takes the least recently checked first.',
    ),
  RECONCILE_STUCK_AFTER_H: int(1)
    .default(48)
    .describe('Hours without a final state after which an order is marked stuck (it is still polled).'),
  RECONCILE_PASS_SIZE: int(1)
    .default(500)
    .describe('Most orders one pass polls; the poll share of the rate budget usually ends a pass first.'),
  RECONCILE_LEASE_S: int(1)
    .default(45)
    .describe(
      'Seconds a claim on an order (a poll, or a create by the submission pump, the reconciler or the CLI) keeps it out of reach of every other process; renewed every third of it while a create waits for a budget slot or an answer, so a dead process’s orders are free again within it (docs/reconciler.md, "Claims"). At least twice H2H_CONNECT_TIMEOUT_MS + H2H_HEADERS_TIMEOUT_MS: nothing is sent with less than half of it left, and every attempt is answered or given up within those two.',
    ),
  CATALOG_REFRESH_S: int(0)
    .default(900)
    .describe(
      'Seconds between two refreshes of the local catalog and the profile balance by `h2h-sync worker` (a BullMQ job scheduler; three upstream calls from the poll share of the rate budget); `0` = only `h2h-sync catalog sync`.',
    ),
  BALANCE_LOW_THRESHOLD: z.coerce
    .number()
    .min(0)
    .default(0)
    .describe(
      'The accounted balance under which a `balance.low` event is sent, once each time it falls under (docs/api.md, "Balance"); `0` = never. Every process that writes orders must use the same value.',
    ),
  ADMIN_HOST: z
    .string()
    .min(1)
    .default(LOOPBACK)
    .describe(
      'Address the admin server of `h2h-sync worker` (Bull Board, `/metrics`, `/healthz`) listens on. Anything but loopback requires ADMIN_USER and ADMIN_PASSWORD.',
    ),
  ADMIN_PORT: int(0)
    .max(65_535)
    .default(3001)
    .describe('Port of the admin server of `h2h-sync worker`; `0` = no admin server.'),
  API_HOST: z
    .string()
    .min(1)
    .default(LOOPBACK)
    .describe(
      'Address the shop API (`h2h-sync api`, docs/api.md) listens on. Every route but /openapi.json needs a bearer token; put TLS in front of it before you open it beyond this host.',
    ),
  API_PORT: int(0).max(65_535).default(3002).describe('Port of the shop API; `0` = a free one.'),
  API_SUBMISSION_BACKLOG: int(1)
    .default(1000)
    .describe(
      'Most orders the shop API keeps queued for the upstream (sent in arrival order at the rate budget’s pace, about 40 a minute); beyond it POST /v1/orders answers 503 with Retry-After and stores nothing.',
    ),
  API_SUBMISSION_MAX_AGE_S: int(0)
    .default(3600)
    .describe(
      'Seconds an order may wait to be sent (queued, or blocked after a 401, with no create in doubt); older, `h2h-sync worker` cancels it with code `EXPIRED` (`order.cancelled`) instead of sending it, so no top-up reaches a customer long after the shop gave up (docs/api.md, "Cancelling"); `0` = never.',
    ),
  ADMIN_USER: z
    .string()
    .min(1)
    .optional()
    .describe('Basic-auth user of the admin server; when set (with ADMIN_PASSWORD) every request needs it.'),
  ADMIN_PASSWORD: z
    .string()
    .min(1)
    .optional()
    .describe('Basic-auth password of the admin server, set together with ADMIN_USER.'),
  H2H_PRIVATE_REDIS_PORT: int(1)
    .max(65_535)
    .default(DEFAULT_PRIVATE_REDIS_PORT)
    .describe(
      "Port of the private `h2h-redis` app (loopback, AOF, data in `var/redis`) pm2's ecosystem runs when REDIS_URL is not set; without REDIS_URL every process and command uses `redis://127.0.0.1:<port>`.",
    ),
});

/** The name of every setting, in the order of the README table. */
export const SETTING_NAMES = Object.keys(settingsSchema.shape) as Array<keyof typeof settingsSchema.shape>;

/** Hosts that only this machine reaches. */
function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
}

/**
 * The rules that tie settings together, and the defaults that follow from another setting.
 * Their messages are shown as written, so each names its variables and the fix.
 */
const validSettings = settingsSchema.transform((s, ctx) => {
  const refuse = (name: keyof typeof s, message: string) =>
    ctx.issues.push({ code: 'custom', path: [name], message, input: s[name] });
  const reservedForCreate = s.H2H_RATE_RESERVE_CREATE ?? defaultReservedForCreate(s.H2H_RATE_LIMIT);
  if (reservedForCreate >= s.H2H_RATE_LIMIT) {
    refuse(
      'H2H_RATE_RESERVE_CREATE',
      `H2H_RATE_RESERVE_CREATE (${reservedForCreate}) must be below H2H_RATE_LIMIT (${s.H2H_RATE_LIMIT}), or polling could never run`,
    );
  }
  const pollFloor = s.H2H_RATE_POLL_FLOOR ?? defaultPollFloor(s.H2H_RATE_LIMIT);
  if (pollFloor > s.H2H_RATE_LIMIT - reservedForCreate) {
    refuse(
      'H2H_RATE_POLL_FLOOR',
      `H2H_RATE_POLL_FLOOR (${pollFloor}) must not exceed H2H_RATE_LIMIT - H2H_RATE_RESERVE_CREATE (${s.H2H_RATE_LIMIT - reservedForCreate}), or creation could be left nothing`,
    );
  }
  // The admin view shows webhook bodies and can retry or delete jobs: never without a password
  // where another machine can reach it.
  if (Boolean(s.ADMIN_USER) !== Boolean(s.ADMIN_PASSWORD)) {
    refuse(
      s.ADMIN_USER ? 'ADMIN_PASSWORD' : 'ADMIN_USER',
      'ADMIN_USER and ADMIN_PASSWORD must be set together (basic auth of the admin server)',
    );
  } else if (s.ADMIN_PORT !== 0 && !s.ADMIN_USER && !isLoopbackHost(s.ADMIN_HOST)) {
    refuse(
      'ADMIN_HOST',
      `ADMIN_HOST=${s.ADMIN_HOST} is not loopback: set ADMIN_USER and ADMIN_PASSWORD (basic auth), or ADMIN_HOST=${LOOPBACK}, or ADMIN_PORT=0 to turn the admin server off`,
    );
  }
  // Node refuses a headers timeout above the request timeout when the server is created.
  if (s.H2H_RECEIVER_HEADERS_TIMEOUT_MS > s.H2H_RECEIVER_REQUEST_TIMEOUT_MS) {
    refuse(
      'H2H_RECEIVER_HEADERS_TIMEOUT_MS',
      `H2H_RECEIVER_HEADERS_TIMEOUT_MS (${s.H2H_RECEIVER_HEADERS_TIMEOUT_MS}) must not exceed H2H_RECEIVER_REQUEST_TIMEOUT_MS (${s.H2H_RECEIVER_REQUEST_TIMEOUT_MS})`,
    );
  }
  // A create is sent only with half a lease left (orders/hold-claim.ts): it must be answered by then.
  const answeredWithinMs = s.H2H_CONNECT_TIMEOUT_MS + s.H2H_HEADERS_TIMEOUT_MS;
  if (s.RECONCILE_LEASE_S * 1000 < 2 * answeredWithinMs) {
    refuse(
      'RECONCILE_LEASE_S',
      `RECONCILE_LEASE_S (${s.RECONCILE_LEASE_S}) must be at least twice H2H_CONNECT_TIMEOUT_MS + H2H_HEADERS_TIMEOUT_MS (${answeredWithinMs} ms): a create is sent only with half a claim left, and must be answered before the claim can pass to another process`,
    );
  }
  if (s.RECONCILE_FIRST_POLL_MIN_S > s.RECONCILE_FIRST_POLL_MAX_S) {
    refuse(
      'RECONCILE_FIRST_POLL_MIN_S',
      `RECONCILE_FIRST_POLL_MIN_S (${s.RECONCILE_FIRST_POLL_MIN_S}) must not exceed RECONCILE_FIRST_POLL_MAX_S (${s.RECONCILE_FIRST_POLL_MAX_S})`,
    );
  }
  return {
    ...s,
    H2H_RATE_RESERVE_CREATE: reservedForCreate,
    H2H_RATE_POLL_FLOOR: pollFloor,
  };
});

/** The validated settings, every default applied. */
export type Settings = z.output<typeof validSettings>;

/** Settings whose values never appear in messages or logs. */
const SECRET_SETTINGS = new Set(['H2H_API_KEY', 'H2H_API_SECRET', 'ADMIN_PASSWORD']);

/** The validated configuration: every setting, and the values several sections share. */
export interface Config extends SharedSettings {
  settings: Settings;
  budget: { limit: number; windowMs: number; reservedForCreate: number; pollFloor: number };
}

/**
 * Reads and validates every setting; throws {@link ConfigError} naming each bad variable. An
 * empty value counts as not set.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, string | undefined> = Object.fromEntries(
    SETTING_NAMES.map((key) => [key, env[key] === '' ? undefined : env[key]]),
  );
  const parsed = validSettings.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => {
      // The cross-field rules of validSettings: their messages name the variables themselves.
      if (issue.code === 'custom') return issue.message;
      const name = String(issue.path[0]);
      const shown = SECRET_SETTINGS.has(name)
        ? '(hidden)'
        : JSON.stringify(name === 'H2H_DB_URL' ? redactUrl(raw[name] ?? '') : raw[name]);
      return `${name}=${shown} is not valid: ${issue.message}`;
    });
    throw new ConfigError(
      `invalid configuration:\n  ${lines.join('\n  ')}\nFix the variables above (see README, "Settings").`,
    );
  }
  const s = parsed.data;
  return {
    settings: s,
    redisUrl: s.REDIS_URL ?? `redis://${LOOPBACK}:${s.H2H_PRIVATE_REDIS_PORT}`,
    dbUrl: storeUrl(s),
    dbLockTimeoutMs: s.H2H_DB_LOCK_TIMEOUT_MS,
    dbPoolMax: s.H2H_DB_POOL_MAX,
    logLevel: s.LOG_LEVEL,
    logFormat: s.LOG_FORMAT,
    budget: {
      limit: s.H2H_RATE_LIMIT,
      windowMs: s.H2H_RATE_WINDOW_MS,
      reservedForCreate: s.H2H_RATE_RESERVE_CREATE,
      pollFloor: s.H2H_RATE_POLL_FLOOR,
    },
  };
}

/**
 * The store's URL: `H2H_DB_URL`, else `H2H_DB_PATH` as a SQLite URL, else the default file.
 * Both set to different stores is refused, naming both (a password hidden).
 */
function storeUrl(s: Settings): string {
  const fromPath = s.H2H_DB_PATH === undefined ? undefined : sqliteUrl(s.H2H_DB_PATH);
  if (s.H2H_DB_URL === undefined) return fromPath ?? sqliteUrl(DEFAULT_DB_PATH);
  let location: ReturnType<typeof parseStoreUrl>;
  try {
    location = parseStoreUrl(s.H2H_DB_URL);
  } catch (error) {
    throw new ConfigError(`H2H_DB_URL is not valid: ${(error as Error).message}`);
  }
  if (fromPath !== undefined && !(location.backend === 'sqlite' && sqliteUrl(location.path) === fromPath)) {
    throw new ConfigError(
      `H2H_DB_URL (${redactUrl(s.H2H_DB_URL)}) and H2H_DB_PATH (${resolve(s.H2H_DB_PATH!)}) name different ` +
        'stores: set only one of them',
    );
  }
  return s.H2H_DB_URL;
}

// The sections below map settings to the options of one component each; what a setting means
// and its default are in the schema above (and the README table generated from it).

/** The admin server's section (docs/deployment.md, "Admin view"); `auth` undefined = none (loopback only). */
export function adminSettings(config: Config) {
  const s = config.settings;
  const auth =
    s.ADMIN_USER && s.ADMIN_PASSWORD ? { user: s.ADMIN_USER, password: s.ADMIN_PASSWORD } : undefined;
  return { host: s.ADMIN_HOST, port: s.ADMIN_PORT, auth };
}
export type AdminSettings = ReturnType<typeof adminSettings>;

/** The shop API's section (docs/api.md). */
export function apiSettings(config: Config) {
  const s = config.settings;
  return {
    host: s.API_HOST,
    port: s.API_PORT,
    submissionBacklog: s.API_SUBMISSION_BACKLOG,
    /** API_SUBMISSION_MAX_AGE_S in ms (the worker's submission pump expires older orders); 0: never. */
    submissionMaxAgeMs: s.API_SUBMISSION_MAX_AGE_S * 1000,
    /** A full backlog's Retry-After: one budget window, after which about a window's worth has left. */
    retryAfterS: Math.ceil(s.H2H_RATE_WINDOW_MS / 1000),
    dbUrl: config.dbUrl,
    dbLockTimeoutMs: config.dbLockTimeoutMs,
    dbPoolMax: config.dbPoolMax,
    logLevel: config.logLevel,
    logFormat: config.logFormat,
    shutdownTimeoutMs: s.H2H_SHUTDOWN_TIMEOUT_MS,
  };
}
export type ApiSettings = ReturnType<typeof apiSettings>;

/** The reconciler's section (docs/reconciler.md), every duration in ms; `backoffMs` is one entry per poll, the last repeating. */
export function reconcilerSettings(config: Config) {
  const s = config.settings;
  return {
    everyMs: s.RECONCILE_EVERY_S * 1000,
    firstPollDelayMs: s.RECONCILE_FIRST_POLL_DELAY_S * 1000,
    firstPollQuantile: s.RECONCILE_FIRST_POLL_QUANTILE,
    firstPollMinMs: s.RECONCILE_FIRST_POLL_MIN_S * 1000,
    firstPollMaxMs: s.RECONCILE_FIRST_POLL_MAX_S * 1000,
    paceMinSamples: s.RECONCILE_PACE_MIN_SAMPLES,
    backoffMs: s.RECONCILE_BACKOFF_S.split(',').map((part) => Number(part.trim()) * 1000),
    auditWindowMs: s.RECONCILE_AUDIT_WINDOW_D * 86_400_000,
    auditEveryMs: s.RECONCILE_AUDIT_EVERY_S * 1000,
    stuckAfterMs: s.RECONCILE_STUCK_AFTER_H * 3_600_000,
    passSize: s.RECONCILE_PASS_SIZE,
    leaseMs: s.RECONCILE_LEASE_S * 1000,
  };
}
export type ReconcilerSettings = ReturnType<typeof reconcilerSettings>;

/** The local catalog's and balance's section (docs/api.md, "Catalog and balance"), in ms. */
export function catalogSettings(config: Config) {
  const s = config.settings;
  return {
    /** 0: no scheduled refresh. */
    refreshEveryMs: s.CATALOG_REFRESH_S * 1000,
    balanceLowThreshold: s.BALANCE_LOW_THRESHOLD,
  };
}
export type CatalogSettings = ReturnType<typeof catalogSettings>;

/** The settings table of the README, generated from the schema. */
export function settingsTable(): string {
  const rows = Object.entries(settingsSchema.shape).map(([name, schema]) => {
    const def = schema.def as { type: string; defaultValue?: unknown };
    const fallback = def.type === 'default' ? `\`${String(def.defaultValue)}\`` : '—';
    return `| \`${name}\` | ${fallback} | ${schema.description ?? ''} |`;
  });
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}
