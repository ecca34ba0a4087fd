import { isIP } from 'node:net';
import { z } from 'zod';
import { int, LOOPBACK, type SharedSettings } from '../config/variables.js';
import { budgetSettings, type budgetVariables } from '../rate-budget/settings.js';

/** The names of address ranges Fastify's `trustProxy` list takes beside addresses (proxy-addr). */
const ADDRESS_RANGES = ['loopback', 'linklocal', 'uniquelocal'];

/** Whether `entry` is an IP address, an address with a prefix length (`10.0.0.0/8`), or a range's name. */
function isProxyAddress(entry: string): boolean {
  if (ADDRESS_RANGES.includes(entry)) return true;
  const [address = '', prefix, ...rest] = entry.split('/');
  const version = isIP(address);
  if (version === 0 || rest.length > 0) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128));
}

/** The shop API's variables (README, "Settings"). */
export const apiVariables = z.object({
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
  API_TRUST_PROXY: z
    .string()
    .transform((text, ctx): boolean | string[] => {
      const value = text.trim().toLowerCase();
      if (value === 'false' || value === '') return false;
      if (value === 'true') return true;
      const entries = value.split(',').map((entry) => entry.trim());
      const wrong = entries.filter((entry) => !isProxyAddress(entry));
      if (wrong.length > 0) {
        ctx.issues.push({
          code: 'custom',
          input: text,
          // A custom issue is shown as written (config.ts), so it names the variable itself.
          message: `API_TRUST_PROXY=${JSON.stringify(text)} is not valid: give false, true or the proxies' addresses, comma-separated (127.0.0.1, 10.0.0.0/8, loopback); not an address: ${wrong.join(', ')}`,
        });
        return z.NEVER;
      }
      return entries;
    })
    .default(false)
    .describe(
      'Whether the shop API believes the `X-Forwarded-For` (and `-Proto`, `-Host`) of a reverse proxy in front of it, so that its logs and the rate limit of requests without a token see the client’s address instead of the proxy’s (docs/deployment.md, "Behind a reverse proxy"): `false`, the connection’s own address; the proxy’s addresses, comma-separated (`127.0.0.1`, `10.0.0.0/8`, `loopback`), believed only from them; or `true`, from every peer, only where nothing reaches the API but through the proxy.',
    ),
  API_RATE_LIMIT_PER_MIN: int(0)
    .default(600)
    .describe(
      'Requests a minute each shop API token may make, counted in Redis so that every API process draws from the same budget (docs/api.md, "Rate limit"); beyond, 429 `RATE_LIMITED` with Retry-After. `0` = no limit.',
    ),
});

/** The shop API's section (docs/api.md). */
export function apiSettings(
  config: SharedSettings & {
    settings: z.output<typeof apiVariables> &
      z.output<typeof budgetVariables> & { H2H_SHUTDOWN_TIMEOUT_MS: number };
  },
) {
  const s = config.settings;
  return {
    host: s.API_HOST,
    port: s.API_PORT,
    submissionBacklog: s.API_SUBMISSION_BACKLOG,
    /** API_SUBMISSION_MAX_AGE_S in ms (the worker's submission pump expires older orders); 0: never. */
    submissionMaxAgeMs: s.API_SUBMISSION_MAX_AGE_S * 1000,
    /** API_TRUST_PROXY as Fastify's `trustProxy`: false, true, or the proxies' addresses. */
    trustProxy: s.API_TRUST_PROXY,
    /** API_RATE_LIMIT_PER_MIN: requests a minute per token; 0: no limit. */
    rateLimitPerMin: s.API_RATE_LIMIT_PER_MIN,
    /** A full backlog's Retry-After: one budget window, after which about a window's worth has left. */
    retryAfterS: Math.ceil(budgetSettings(config).windowMs / 1000),
    dbUrl: config.dbUrl,
    dbLockTimeoutMs: config.dbLockTimeoutMs,
    dbPoolMax: config.dbPoolMax,
    logLevel: config.logLevel,
    logFormat: config.logFormat,
    shutdownTimeoutMs: s.H2H_SHUTDOWN_TIMEOUT_MS,
  };
}
export type ApiSettings = ReturnType<typeof apiSettings>;
