import { z } from 'zod';

/**
 * Every setting of h2h-sync, read once from the environment at start-up and validated here.
 * Each entry's description and default feed the settings table of the README
 * (`npm run docs:config` prints it; a test keeps the README in step). Components receive only
 * their own section of {@link Config}; nothing else reads `process.env`.
 */

const int = (min: number) => z.coerce.number().int().min(min);
/** An HTTP header name, compared in lower case as Node delivers them. */
const header = z
  .string()
  .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'must be an HTTP header name')
  .transform((name) => name.toLowerCase());
const list = z.string().transform((s) =>
  s
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean),
);

export const settingsSchema = z.object({
  H2H_BASE_URL: z
    .url({ protocol: /^https?$/ })
    .optional()
    .describe('Upstream base URL including `/v1/member-api`. Required by commands that call the upstream.'),
  H2H_API_KEY: z
    .string()
    .min(1)
    .optional()
    .describe('Upstream API key. Required by commands that call the upstream.'),
  H2H_API_SECRET: list
    .optional()
    .describe(
      'Webhook secrets, comma-separated, newest first (two during a rotation). Required by the receiver.',
    ),
  H2H_AUTH_STYLE: z
    .enum(['x-api-key', 'bearer'])
    .default('x-api-key')
    .describe('How the API key is sent: `x-api-key` header or `Authorization: Bearer`.'),
  H2H_CONNECT_TIMEOUT_MS: int(1).default(5_000).describe('Upstream connect timeout.'),
  H2H_HEADERS_TIMEOUT_MS: int(1).default(15_000).describe('Upstream timeout until response headers arrive.'),
  H2H_BODY_TIMEOUT_MS: int(1).default(15_000).describe('Upstream timeout between body chunks.'),
  H2H_RETRY_MAX_ATTEMPTS: int(1).default(4).describe('Attempts per upstream call, first one included.'),
  H2H_RATE_LIMIT: int(1)
    .default(60)
    .describe('Upstream calls allowed per rate window, shared by every process.'),
  H2H_RATE_WINDOW_MS: int(1000).default(60_000).describe('Length of the rolling rate window.'),
  H2H_RATE_RESERVE_CREATE: int(0)
    .default(20)
    .describe('Calls per window that status polling may never use, kept for order creation.'),
  REDIS_URL: z
    .url({ protocol: /^rediss?$/ })
    .default('redis://127.0.0.1:6379')
    .describe('Redis for the queues and the shared rate budget.'),
  H2H_DB_PATH: z.string().min(1).default('./var/h2h-sync.db').describe('SQLite order store file.'),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .default('info')
    .describe('pino log level.'),
  HOST: z.string().min(1).default('127.0.0.1').describe('Address the webhook receiver listens on.'),
  PORT: int(0).max(65_535).default(3000).describe('Port the webhook receiver listens on; `0` = a free one.'),
  H2H_WEBHOOK_PATH: z
    .string()
    .regex(/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/, 'must be a URL path starting with /')
    .default('/webhooks/h2h')
    .describe('Path the receiver accepts webhooks on (`POST`).'),
  H2H_WEBHOOK_TOLERANCE_S: int(1)
    .default(300)
    .describe('Seconds a webhook timestamp may be from this clock, either way, before it is refused.'),
  H2H_WEBHOOK_BODY_LIMIT: int(1)
    .default(262_144)
    .describe('Largest webhook body the receiver accepts, in bytes; larger is 413.'),
  H2H_TIMESTAMP_HEADER: header
    .default('x-timestamp')
    .describe('Webhook header carrying the signed timestamp.'),
  H2H_SIGNATURE_HEADER: header.default('x-signature').describe('Webhook header carrying the signature.'),
  H2H_EVENT_ID_HEADER: header
    .default('x-event-id')
    .describe('Webhook header carrying the event id the receiver dedupes on.'),
  H2H_EVENT_TYPE_HEADER: header.default('x-event-type').describe('Webhook header carrying the event type.'),
  H2H_ENQUEUE_TIMEOUT_MS: int(1)
    .default(2_000)
    .describe('Longest wait for Redis to acknowledge a queued webhook before the receiver answers 503.'),
  H2H_SHUTDOWN_TIMEOUT_MS: int(1)
    .default(10_000)
    .describe('Longest graceful drain of the receiver on SIGINT/SIGTERM before it exits anyway.'),
  H2H_WORKER_CONCURRENCY: int(1)
    .default(100)
    .describe(
      'Webhook jobs one event worker process holds at once; they share group commits, so also the most events one commit holds.',
    ),
  H2H_WORKER_BATCH_SIZE: int(1)
    .optional()
    .describe(
      'Events at which the worker commits a batch without waiting for the next event-loop turn; default and maximum: `H2H_WORKER_CONCURRENCY`.',
    ),
  H2H_WORKER_LOCK_DURATION_MS: int(1)
    .default(30_000)
    .describe(
      'How long a webhook job stays locked to its worker without a renewal; a crashed worker’s jobs are taken over after it.',
    ),
  H2H_WORKER_STALLED_INTERVAL_MS: int(1)
    .default(30_000)
    .describe('How often a worker returns stalled jobs (their lock expired: the worker died) to the queue.'),
  H2H_WORKER_MAX_STALLED_COUNT: int(0)
    .default(1)
    .describe('Times a webhook job may stall and be taken over before it is parked in the failed set.'),
  H2H_WORKER_SHUTDOWN_TIMEOUT_MS: int(1)
    .default(10_000)
    .describe(
      'Longest graceful stop of the worker on SIGINT/SIGTERM (finish and commit active jobs) before it exits anyway.',
    ),
  RECONCILE_ENABLED: z
    .stringbool()
    .default(true)
    .describe(
      'Whether `h2h-sync worker` also reconciles (needs H2H_BASE_URL and H2H_API_KEY). `false` runs a worker that only applies webhooks, e.g. an extra event worker.',
    ),
  RECONCILE_EVERY_S: int(1)
    .default(60)
    .describe('Seconds between two reconciliation passes (a BullMQ job scheduler, one pass at a time).'),
  RECONCILE_FIRST_POLL_DELAY_S: int(0)
    .default(30)
    .describe(
      'Seconds after an order is created or changes before its first poll: its webhook is overdue then. Every process that writes orders must use the same value.',
    ),
  RECONCILE_BACKOFF_S: z
    .string()
    .regex(/^\s*[1-9]\d*\s*(,\s*[1-9]\d*\s*)*$/, 'must be positive whole seconds, comma-separated')
    .default('60,120,300,600,1800,3600')
    .describe(
      'Seconds between polls of an order that does not change, one entry per poll; the last repeats (the cap).',
    ),
  RECONCILE_REFUND_WATCH_S: int(0)
    .default(0)
    .describe(
      'Seconds a SUCCESS with its serial is still polled, to find a refund whose webhook was lost for good; `0` = settled at once. Costs polls: see docs/reconciler.md. Every process that writes orders must use the same value.',
    ),
  RECONCILE_STUCK_AFTER_H: int(1)
    .default(48)
    .describe('Hours without a final state after which an order is marked stuck (it is still polled).'),
  RECONCILE_PASS_SIZE: int(1)
    .default(500)
    .describe('Most orders one pass polls; the poll share of the rate budget usually ends a pass first.'),
  RECONCILE_LEASE_S: int(1)
    .default(300)
    .describe(
      'Seconds an order claimed by a reconciler stays out of reach of the others: longer than one poll, or one repeated create with its wait for a budget slot, with their retries.',
    ),
  ADMIN_HOST: z
    .string()
    .min(1)
    .default('127.0.0.1')
    .describe(
      'Address the admin server of `h2h-sync worker` (Bull Board, `/metrics`, `/healthz`) listens on. Anything but loopback requires ADMIN_USER and ADMIN_PASSWORD.',
    ),
  ADMIN_PORT: int(0)
    .max(65_535)
    .default(3001)
    .describe('Port of the admin server of `h2h-sync worker`; `0` = no admin server.'),
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
  H2H_RECEIVER_INSTANCES: int(1)
    .default(2)
    .describe('pm2 only (`ecosystem.config.js`): receiver processes in cluster mode, sharing `PORT`.'),
  H2H_PRIVATE_REDIS_PORT: int(1)
    .max(65_535)
    .default(6380)
    .describe(
      'pm2 only: port of the private `h2h-redis` app (loopback, AOF, data in `./var/redis`) the ecosystem runs when REDIS_URL is not set; the other apps get `REDIS_URL=redis://127.0.0.1:<port>`.',
    ),
});

export type Settings = z.infer<typeof settingsSchema>;

/** Settings whose values never appear in messages or logs. */
const SECRET_SETTINGS = new Set(['H2H_API_KEY', 'H2H_API_SECRET', 'ADMIN_PASSWORD']);

/** A setting is missing or malformed; the message names the variable and the fix. */
export class ConfigError extends Error {
  override name = 'ConfigError';
  readonly code = 'CONFIG_INVALID';
}

/** Options of the upstream client, as the config provides them. */
export interface UpstreamSettings {
  baseUrl: string;
  apiKey: string;
  authStyle: 'x-api-key' | 'bearer';
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  retryMaxAttempts: number;
}

/** The validated configuration, one section per component. */
export interface Config {
  settings: Settings;
  redisUrl: string;
  dbPath: string;
  logLevel: Settings['LOG_LEVEL'];
  budget: { limit: number; windowMs: number; reservedForCreate: number };
}

/** Reads and validates every setting; throws {@link ConfigError} naming each bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, string | undefined> = Object.fromEntries(
    Object.keys(settingsSchema.shape).map((key) => [key, env[key] === '' ? undefined : env[key]]),
  );
  const parsed = settingsSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => {
      const name = String(issue.path[0]);
      const shown = SECRET_SETTINGS.has(name) ? '(hidden)' : JSON.stringify(raw[name]);
      return `${name}=${shown} is not valid: ${issue.message}`;
    });
    throw new ConfigError(
      `invalid configuration:\n  ${lines.join('\n  ')}\nFix the variables above (see README, "Settings").`,
    );
  }
  const s = parsed.data;
  if (s.H2H_RATE_RESERVE_CREATE >= s.H2H_RATE_LIMIT) {
    throw new ConfigError(
      `H2H_RATE_RESERVE_CREATE (${s.H2H_RATE_RESERVE_CREATE}) must be below H2H_RATE_LIMIT (${s.H2H_RATE_LIMIT}), or polling could never run`,
    );
  }
  return {
    settings: s,
    redisUrl: s.REDIS_URL,
    dbPath: s.H2H_DB_PATH,
    logLevel: s.LOG_LEVEL,
    budget: {
      limit: s.H2H_RATE_LIMIT,
      windowMs: s.H2H_RATE_WINDOW_MS,
      reservedForCreate: s.H2H_RATE_RESERVE_CREATE,
    },
  };
}

/** The upstream section; throws {@link ConfigError} when the URL or key a command needs is missing. */
export function upstreamSettings(config: Config): UpstreamSettings {
  const s = config.settings;
  const missing = [!s.H2H_BASE_URL && 'H2H_BASE_URL', !s.H2H_API_KEY && 'H2H_API_KEY'].filter(Boolean);
  if (missing.length > 0) {
    throw new ConfigError(
      `${missing.join(' and ')} must be set to call the upstream (for the simulator: H2H_BASE_URL=http://127.0.0.1:4010/v1/member-api H2H_API_KEY=sim_key_demo_M0001)`,
    );
  }
  return {
    baseUrl: s.H2H_BASE_URL!,
    apiKey: s.H2H_API_KEY!,
    authStyle: s.H2H_AUTH_STYLE,
    connectTimeoutMs: s.H2H_CONNECT_TIMEOUT_MS,
    headersTimeoutMs: s.H2H_HEADERS_TIMEOUT_MS,
    bodyTimeoutMs: s.H2H_BODY_TIMEOUT_MS,
    retryMaxAttempts: s.H2H_RETRY_MAX_ATTEMPTS,
  };
}

/** The webhook secrets; throws {@link ConfigError} when none is configured. */
export function webhookSecrets(config: Config): string[] {
  const secrets = config.settings.H2H_API_SECRET ?? [];
  if (secrets.length === 0) {
    throw new ConfigError('H2H_API_SECRET must be set (comma-separated, newest first) to verify webhooks');
  }
  return secrets;
}

/** The webhook receiver's section of the configuration (docs/receiver.md, "Settings"). */
export interface ReceiverSettings {
  /** `HOST`, default `127.0.0.1`. */
  host: string;
  /** `PORT`, default 3000. */
  port: number;
  /** `H2H_WEBHOOK_PATH`, default `/webhooks/h2h`. */
  path: string;
  /** Accepted secrets, newest first (`H2H_API_SECRET`). */
  secrets: string[];
  /** `H2H_WEBHOOK_TOLERANCE_S`, default 300. */
  toleranceS: number;
  /** `H2H_WEBHOOK_BODY_LIMIT`, default 262144 (256 KiB). */
  bodyLimit: number;
  /** Header names in lower case; defaults `x-timestamp`, `x-signature`, `x-event-id`, `x-event-type`. */
  headers: { timestamp: string; signature: string; eventId: string; eventType: string };
  /** `H2H_ENQUEUE_TIMEOUT_MS`, default 2000. */
  enqueueTimeoutMs: number;
  /** `H2H_SHUTDOWN_TIMEOUT_MS`, default 10000. */
  shutdownTimeoutMs: number;
  redisUrl: string;
  logLevel: Settings['LOG_LEVEL'];
}

/** The receiver section; throws {@link ConfigError} when no webhook secret is configured. */
export function receiverSettings(config: Config): ReceiverSettings {
  const s = config.settings;
  return {
    host: s.HOST,
    port: s.PORT,
    path: s.H2H_WEBHOOK_PATH,
    secrets: webhookSecrets(config),
    toleranceS: s.H2H_WEBHOOK_TOLERANCE_S,
    bodyLimit: s.H2H_WEBHOOK_BODY_LIMIT,
    headers: {
      timestamp: s.H2H_TIMESTAMP_HEADER,
      signature: s.H2H_SIGNATURE_HEADER,
      eventId: s.H2H_EVENT_ID_HEADER,
      eventType: s.H2H_EVENT_TYPE_HEADER,
    },
    enqueueTimeoutMs: s.H2H_ENQUEUE_TIMEOUT_MS,
    shutdownTimeoutMs: s.H2H_SHUTDOWN_TIMEOUT_MS,
    redisUrl: config.redisUrl,
    logLevel: config.logLevel,
  };
}

/** The admin server's section of the configuration (docs/deployment.md, "Admin"). */
export interface AdminSettings {
  /** `ADMIN_HOST`, default `127.0.0.1`. */
  host: string;
  /** `ADMIN_PORT`, default 3001; `0` turns the admin server off. */
  port: number;
  /** Basic-auth credentials (`ADMIN_USER`, `ADMIN_PASSWORD`); undefined = no auth (loopback only). */
  auth: { user: string; password: string } | undefined;
}

/** Hosts that only this machine reaches. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
}

/**
 * The admin section. Throws {@link ConfigError} when only one of ADMIN_USER and ADMIN_PASSWORD
 * is set, or when ADMIN_HOST is not loopback and they are not: the queues' contents (webhook
 * bodies) and their retry and delete buttons are never exposed without authentication.
 */
export function adminSettings(config: Config): AdminSettings {
  const s = config.settings;
  if (Boolean(s.ADMIN_USER) !== Boolean(s.ADMIN_PASSWORD)) {
    throw new ConfigError(
      'ADMIN_USER and ADMIN_PASSWORD must be set together (basic auth of the admin server)',
    );
  }
  const auth =
    s.ADMIN_USER && s.ADMIN_PASSWORD ? { user: s.ADMIN_USER, password: s.ADMIN_PASSWORD } : undefined;
  if (s.ADMIN_PORT !== 0 && !auth && !isLoopbackHost(s.ADMIN_HOST)) {
    throw new ConfigError(
      `ADMIN_HOST=${s.ADMIN_HOST} is not loopback: set ADMIN_USER and ADMIN_PASSWORD (basic auth), or ADMIN_HOST=127.0.0.1, or ADMIN_PORT=0 to turn the admin server off`,
    );
  }
  return { host: s.ADMIN_HOST, port: s.ADMIN_PORT, auth };
}

/** The event worker's section of the configuration (docs/worker.md, "Settings"). */
export interface WorkerSettings {
  redisUrl: string;
  dbPath: string;
  /** `H2H_WORKER_CONCURRENCY`, default 100. */
  concurrency: number;
  /** `H2H_WORKER_BATCH_SIZE`, default and maximum: the concurrency. */
  batchSize: number;
  /** `H2H_WORKER_LOCK_DURATION_MS`, default 30000. */
  lockDurationMs: number;
  /** `H2H_WORKER_STALLED_INTERVAL_MS`, default 30000. */
  stalledIntervalMs: number;
  /** `H2H_WORKER_MAX_STALLED_COUNT`, default 1. */
  maxStalledCount: number;
  /** `H2H_WORKER_SHUTDOWN_TIMEOUT_MS`, default 10000. */
  shutdownTimeoutMs: number;
  logLevel: Settings['LOG_LEVEL'];
}

/** The worker section: a batch never holds more events than the jobs in flight. */
export function workerSettings(config: Config): WorkerSettings {
  const s = config.settings;
  return {
    redisUrl: config.redisUrl,
    dbPath: config.dbPath,
    concurrency: s.H2H_WORKER_CONCURRENCY,
    batchSize: Math.min(s.H2H_WORKER_BATCH_SIZE ?? s.H2H_WORKER_CONCURRENCY, s.H2H_WORKER_CONCURRENCY),
    lockDurationMs: s.H2H_WORKER_LOCK_DURATION_MS,
    stalledIntervalMs: s.H2H_WORKER_STALLED_INTERVAL_MS,
    maxStalledCount: s.H2H_WORKER_MAX_STALLED_COUNT,
    shutdownTimeoutMs: s.H2H_WORKER_SHUTDOWN_TIMEOUT_MS,
    logLevel: config.logLevel,
  };
}

/** The reconciler's section of the configuration (docs/reconciler.md, "Settings"), in ms. */
export interface ReconcilerSettings {
  /** Interval of the pass scheduler: `RECONCILE_EVERY_S`, default 60 s. */
  everyMs: number;
  /** Delay of the first poll after a creation or a change: `RECONCILE_FIRST_POLL_DELAY_S`, default 30 s. */
  firstPollDelayMs: number;
  /**
   * Interval after the 1st, 2nd … poll without a change; the last entry repeats:
   * `RECONCILE_BACKOFF_S`, default 1, 2, 5, 10, 30 min, 1 h.
   */
  backoffMs: number[];
  /** How long a SUCCESS with its serial stays polled for a refund: `RECONCILE_REFUND_WATCH_S`, default 0. */
  refundWatchMs: number;
  /** Age without a final state after which an order is stuck: `RECONCILE_STUCK_AFTER_H`, default 48 h. */
  stuckAfterMs: number;
  /** Most orders one pass polls: `RECONCILE_PASS_SIZE`, default 500. */
  passSize: number;
  /** How long a claim keeps other pollers off an order: `RECONCILE_LEASE_S`, default 300 s. */
  leaseMs: number;
}

/** The reconciler section. */
export function reconcilerSettings(config: Config): ReconcilerSettings {
  const s = config.settings;
  return {
    everyMs: s.RECONCILE_EVERY_S * 1000,
    firstPollDelayMs: s.RECONCILE_FIRST_POLL_DELAY_S * 1000,
    backoffMs: s.RECONCILE_BACKOFF_S.split(',').map((part) => Number(part.trim()) * 1000),
    refundWatchMs: s.RECONCILE_REFUND_WATCH_S * 1000,
    stuckAfterMs: s.RECONCILE_STUCK_AFTER_H * 3_600_000,
    passSize: s.RECONCILE_PASS_SIZE,
    leaseMs: s.RECONCILE_LEASE_S * 1000,
  };
}

/** The settings table of the README, generated from the schema. */
export function settingsTable(): string {
  const rows = Object.entries(settingsSchema.shape).map(([name, schema]) => {
    const def = schema.def as { type: string; defaultValue?: unknown };
    const fallback = def.type === 'default' ? `\`${String(def.defaultValue)}\`` : '—';
    return `| \`${name}\` | ${fallback} | ${schema.description ?? ''} |`;
  });
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}
