import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { adminVariables } from '../admin/settings.js';
import { apiVariables } from '../api/settings.js';
import { type ProductLink, readProductLinks } from '../catalog/product-map.js';
import { catalogVariables } from '../catalog/settings.js';
import { notifyVariables } from '../notify/settings.js';
import { DEFAULT_LOG_FORMAT, DEFAULT_LOG_LEVEL, LOG_FORMATS, LOG_LEVELS } from '../observability/defaults.js';
import { DEFAULT_PRIVATE_REDIS_PORT } from '../queue/defaults.js';
import { type BudgetSettings, budgetSettings, budgetVariables } from '../rate-budget/settings.js';
import { receiverVariables } from '../receiver/settings.js';
import { reconcilerVariables } from '../reconciler/settings.js';
import { routingVariables } from '../routing/settings.js';
import { DEFAULT_SHUTDOWN_TIMEOUT_MS } from '../shared/defaults.js';
import { parseSentinelEndpoint, redactRedisAddress, sentinelRedisAddress } from '../shared/redis-address.js';
import { DEFAULT_LOCK_TIMEOUT_MS, DEFAULT_POOL_MAX } from '../store/defaults.js';
import { parseStoreUrl, redactUrl, STORE_URL_PATTERN, sqliteUrl } from '../store/store-url.js';
import { upstreamVariables } from '../upstream/settings.js';
import { readUpstreamAccounts, type UpstreamAccount } from '../upstream/upstreams.js';
import { workerVariables } from '../worker/settings.js';
import { ConfigError } from './config-error.js';
import { int, LOOPBACK, list, type SharedSettings } from './variables.js';

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

export { type AdminSettings, adminSettings } from '../admin/settings.js';
export { type ApiSettings, apiSettings } from '../api/settings.js';
export { type CatalogSettings, catalogSettings } from '../catalog/settings.js';
export { type NotifySettings, notifySettings } from '../notify/settings.js';
export { type BudgetSettings, budgetSettings } from '../rate-budget/settings.js';
export { type ReceiverSettings, receiverSettings, webhookUpstreams } from '../receiver/settings.js';
export { type ReconcilerSettings, reconcilerSettings } from '../reconciler/settings.js';
export { failoverSettings, type RoutingSettings, routingSettings } from '../routing/settings.js';
export {
  accountSettings,
  SIMULATOR_BASE_URL,
  type UpstreamSettings,
  upstreamSettings,
} from '../upstream/settings.js';
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

/** The variables of more than one component: Redis, the store, logs, the HTTP services' drain. */
const sharedVariables = z.object({
  REDIS_URL: z
    .url({ protocol: /^rediss?$/ })
    .optional()
    .describe(
      "Redis for the queues and the shared rate budget. Default: the deployment's private Redis, `redis://127.0.0.1:<H2H_PRIVATE_REDIS_PORT>`, the one pm2's ecosystem runs when REDIS_URL is not set, so the CLI finds it too.",
    ),
  H2H_PRIVATE_REDIS_PORT: int(1)
    .max(65_535)
    .default(DEFAULT_PRIVATE_REDIS_PORT)
    .describe(
      "Port of the private `h2h-redis` app (loopback, AOF, data in `var/redis`) pm2's ecosystem runs when REDIS_URL is not set; without REDIS_URL every process and command uses `redis://127.0.0.1:<port>`.",
    ),
  H2H_REDIS_SENTINELS: list
    .refine((entries) => entries.every(isSentinelEndpoint), {
      message:
        'H2H_REDIS_SENTINELS must list host:port entries, comma-separated (the port defaults to 26379)',
    })
    .optional()
    .describe(
      'Redis behind Sentinel: the sentinels, `host:port` comma-separated (port default 26379). Every connection then asks them for the primary of `H2H_REDIS_SENTINEL_MASTER` and follows a failover; `REDIS_URL` still gives the scheme (`rediss` = TLS, to the sentinels too), user, password and database, its host unused (docs/deployment.md, "Redis with Sentinel").',
    ),
  H2H_REDIS_SENTINEL_MASTER: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/, 'must be a Sentinel master name (letters, digits, . _ -)')
    .optional()
    .describe(
      'The master group name the sentinels monitor (`sentinel monitor <name> …`); required with `H2H_REDIS_SENTINELS`.',
    ),
  H2H_REDIS_SENTINEL_PASSWORD: z
    .string()
    .min(1)
    .optional()
    .describe("The sentinels' password (`requirepass` of the sentinels), when they have one; never logged."),
  H2H_DB_URL: z
    .string()
    .regex(STORE_URL_PATTERN, 'must start with sqlite:, postgres:// or postgresql://')
    .optional()
    .describe(
      'The order store: `sqlite:///absolute/path` or `sqlite:relative/path` (SQLite, the embedded default, one host), or `postgres://user@host:port/db` (PostgreSQL, for several hosts; a password left out is read from `PGPASSWORD`); with a standby, list every server, `postgres://user@host1:port1,host2:port2/db?target_session_attrs=read-write` (docs/deployment.md, "PostgreSQL with a standby"). Default: `sqlite://` + `H2H_DB_PATH`, else `var/h2h-sync.db` in the installation directory, whatever the working directory. Commands that only read refuse to create a SQLite file. A password in it never appears in logs or errors.',
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
    .default(DEFAULT_SHUTDOWN_TIMEOUT_MS)
    .describe(
      'Longest graceful drain of the receiver and the shop API on SIGINT/SIGTERM before they exit anyway.',
    ),
});

/**
 * Every setting, section by section: the README table's order. A component's variables are in
 * its `src/<component>/settings.ts` (README, "Settings", "Adding a setting").
 */
export const settingsSchema = z.object({
  ...upstreamVariables.shape,
  ...budgetVariables.shape,
  ...sharedVariables.shape,
  ...receiverVariables.shape,
  ...workerVariables.shape,
  ...notifyVariables.shape,
  ...reconcilerVariables.shape,
  ...routingVariables.shape,
  ...catalogVariables.shape,
  ...adminVariables.shape,
  ...apiVariables.shape,
});

/** The name of every setting, in the order of the README table. */
export const SETTING_NAMES = Object.keys(settingsSchema.shape) as Array<keyof typeof settingsSchema.shape>;

function isSentinelEndpoint(entry: string): boolean {
  try {
    parseSentinelEndpoint(entry);
    return true;
  } catch {
    return false;
  }
}

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
  const { reservedForCreate, pollFloor } = budgetSettings({ settings: s });
  if (reservedForCreate >= s.H2H_RATE_LIMIT) {
    refuse(
      'H2H_RATE_RESERVE_CREATE',
      `H2H_RATE_RESERVE_CREATE (${reservedForCreate}) must be below H2H_RATE_LIMIT (${s.H2H_RATE_LIMIT}), or polling could never run`,
    );
  }
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
  if (s.H2H_REDIS_SENTINELS?.length && !s.H2H_REDIS_SENTINEL_MASTER) {
    refuse(
      'H2H_REDIS_SENTINEL_MASTER',
      'H2H_REDIS_SENTINELS is set: set H2H_REDIS_SENTINEL_MASTER to the master name the sentinels monitor',
    );
  } else if (
    !s.H2H_REDIS_SENTINELS?.length &&
    (s.H2H_REDIS_SENTINEL_MASTER || s.H2H_REDIS_SENTINEL_PASSWORD)
  ) {
    refuse(
      'H2H_REDIS_SENTINELS',
      'H2H_REDIS_SENTINEL_MASTER and H2H_REDIS_SENTINEL_PASSWORD need H2H_REDIS_SENTINELS (the sentinels, host:port comma-separated)',
    );
  }
  if (
    s.H2H_RECEIVER_REPLICA_ACKS > 0 &&
    2 * s.H2H_RECEIVER_REPLICA_ACK_TIMEOUT_MS >= s.H2H_ENQUEUE_TIMEOUT_MS
  ) {
    refuse(
      'H2H_RECEIVER_REPLICA_ACK_TIMEOUT_MS',
      `twice H2H_RECEIVER_REPLICA_ACK_TIMEOUT_MS (${s.H2H_RECEIVER_REPLICA_ACK_TIMEOUT_MS}) must be below H2H_ENQUEUE_TIMEOUT_MS (${s.H2H_ENQUEUE_TIMEOUT_MS}), which bounds every Redis command of the receiver: a webhook queued while a WAIT is out waits for it, then for the next`,
    );
  }
  if (s.RECONCILE_FIRST_POLL_MIN_S > s.RECONCILE_FIRST_POLL_MAX_S) {
    refuse(
      'RECONCILE_FIRST_POLL_MIN_S',
      `RECONCILE_FIRST_POLL_MIN_S (${s.RECONCILE_FIRST_POLL_MIN_S}) must not exceed RECONCILE_FIRST_POLL_MAX_S (${s.RECONCILE_FIRST_POLL_MAX_S})`,
    );
  }
  // The history outlives the feed: an order's events leave the feed first, from its oldest end.
  if (s.H2H_HISTORY_RETENTION_D > 0 && s.H2H_HISTORY_RETENTION_D < s.H2H_FEED_RETENTION_D) {
    refuse(
      'H2H_HISTORY_RETENTION_D',
      `H2H_HISTORY_RETENTION_D (${s.H2H_HISTORY_RETENTION_D}) must be 0 (keep the history for ever) or at least H2H_FEED_RETENTION_D (${s.H2H_FEED_RETENTION_D}): an order's history is the longer record, and the feed keeps its events for the shop's cursor; raise H2H_HISTORY_RETENTION_D, or lower H2H_FEED_RETENTION_D`,
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
const SECRET_SETTINGS = new Set([
  'H2H_API_KEY',
  'H2H_API_SECRET',
  'ADMIN_PASSWORD',
  'H2H_REDIS_SENTINEL_PASSWORD',
]);

/** The validated configuration: every setting, and the values several sections share. */
export interface Config extends SharedSettings {
  settings: Settings;
  /** The rate budget's section, {@link budgetSettings}. */
  budget: BudgetSettings;
  /** Every upstream account, the default one first unless `H2H_UPSTREAMS_FILE` orders them otherwise. */
  upstreams: UpstreamAccount[];
  /** The product map's links (`H2H_PRODUCT_MAP_FILE`), checked against {@link upstreams}; empty without it. */
  productLinks: ProductLink[];
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
        : JSON.stringify(
            name === 'H2H_DB_URL'
              ? redactUrl(raw[name] ?? '')
              : name === 'REDIS_URL'
                ? redactRedisAddress(raw[name] ?? '')
                : raw[name],
          );
      return `${name}=${shown} is not valid: ${issue.message}`;
    });
    throw new ConfigError(
      `invalid configuration:\n  ${lines.join('\n  ')}\nFix the variables above (see README, "Settings").`,
    );
  }
  const s = parsed.data;
  const upstreams = readUpstreamAccounts({
    file: s.H2H_UPSTREAMS_FILE,
    baseUrl: s.H2H_BASE_URL,
    apiKey: s.H2H_API_KEY,
    secrets: s.H2H_API_SECRET ?? [],
    rateLimit: s.H2H_RATE_LIMIT,
    env,
  });
  return {
    settings: s,
    redisUrl: redisAddress(s),
    dbUrl: storeUrl(s),
    dbLockTimeoutMs: s.H2H_DB_LOCK_TIMEOUT_MS,
    dbPoolMax: s.H2H_DB_POOL_MAX,
    logLevel: s.LOG_LEVEL,
    logFormat: s.LOG_FORMAT,
    budget: budgetSettings({ settings: s }),
    upstreams,
    productLinks: readProductLinks(
      s.H2H_PRODUCT_MAP_FILE,
      upstreams.map((account) => account.name),
    ),
  };
}

/**
 * Where every connection finds Redis (src/shared/redis-address.ts): `REDIS_URL` (default: the
 * private Redis), or, with `H2H_REDIS_SENTINELS`, the Sentinel address that takes its scheme and
 * credentials from `REDIS_URL`.
 */
function redisAddress(s: Settings): string {
  const url = s.REDIS_URL ?? `redis://${LOOPBACK}:${s.H2H_PRIVATE_REDIS_PORT}`;
  if (!s.H2H_REDIS_SENTINELS?.length || !s.H2H_REDIS_SENTINEL_MASTER) return url;
  return sentinelRedisAddress({
    url,
    sentinels: s.H2H_REDIS_SENTINELS,
    masterName: s.H2H_REDIS_SENTINEL_MASTER,
    sentinelPassword: s.H2H_REDIS_SENTINEL_PASSWORD,
  });
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

/** The settings table of the README, generated from the schema. */
export function settingsTable(): string {
  const rows = Object.entries(settingsSchema.shape).map(([name, schema]) => {
    const def = schema.def as { type: string; defaultValue?: unknown };
    const fallback = def.type === 'default' ? `\`${String(def.defaultValue)}\`` : '—';
    return `| \`${name}\` | ${fallback} | ${schema.description ?? ''} |`;
  });
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}
