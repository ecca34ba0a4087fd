/**
 * Where Redis is, as the configuration hands it to every component that connects: one string, so
 * that a component's options carry it as they carry a URL. It is either a `redis://` or
 * `rediss://` URL (one server; `rediss` = TLS), or the Sentinel form the configuration composes
 * from `H2H_REDIS_SENTINELS` and `H2H_REDIS_SENTINEL_MASTER` ({@link sentinelRedisAddress}):
 *
 * ```
 * redis+sentinel://[user[:password]@]<master name>[/<db>]?sentinels=host:port,host:port[&sentinel_password=…]
 * ```
 *
 * (`rediss+sentinel` for TLS to the sentinels and the servers). A leaf module: no package is
 * loaded, so the configuration can compose and redact addresses (docs/cli.md, "Adding a command").
 * The connections themselves come from `createRedis` (redis-client.ts).
 */

/** The port of a sentinel given without one (Redis Sentinel's own default). */
export const DEFAULT_SENTINEL_PORT = 26_379;

/** One sentinel. */
export interface SentinelEndpoint {
  host: string;
  port: number;
}

/** A Redis address taken apart ({@link parseRedisAddress}). */
export type RedisTarget =
  | { kind: 'url'; url: string }
  | {
      kind: 'sentinel';
      /** The master group name the sentinels monitor. */
      masterName: string;
      sentinels: SentinelEndpoint[];
      /** TLS to the sentinels and to the servers they name. */
      tls: boolean;
      username?: string;
      /** The servers' password (not the sentinels'). */
      password?: string;
      sentinelPassword?: string;
      db?: number;
    };

const SENTINEL_PROTOCOLS = new Set(['redis+sentinel:', 'rediss+sentinel:']);

/**
 * `host:port` (`[v6]:port` for IPv6; the port defaults to {@link DEFAULT_SENTINEL_PORT}), or
 * throws a RangeError naming the entry.
 */
export function parseSentinelEndpoint(entry: string): SentinelEndpoint {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]\s/]+))(?::(\d{1,5}))?$/.exec(entry.trim());
  const port = match?.[3] === undefined ? DEFAULT_SENTINEL_PORT : Number(match[3]);
  if (!match || port < 1 || port > 65_535) {
    throw new RangeError(`"${entry}" is not host:port`);
  }
  return { host: (match[1] ?? match[2])!, port };
}

/**
 * The Sentinel address of master group `masterName` behind `sentinels` (`host:port` each). The
 * servers' scheme (`rediss` = TLS, for the sentinels too), user, password and database number
 * come from `url`; its host and port are not used: the sentinels name the primary.
 */
export function sentinelRedisAddress(options: {
  url: string;
  sentinels: readonly string[];
  masterName: string;
  sentinelPassword?: string | undefined;
}): string {
  const base = new URL(options.url);
  const scheme = base.protocol === 'rediss:' ? 'rediss+sentinel' : 'redis+sentinel';
  const address = new URL(`${scheme}://${encodeURIComponent(options.masterName)}`);
  address.username = base.username;
  address.password = base.password;
  address.pathname = base.pathname.length > 1 ? base.pathname : '';
  const sentinels = options.sentinels.map(parseSentinelEndpoint);
  // Written by hand: URLSearchParams would encode the list's colons and commas, which logs show.
  const list = sentinels.map(({ host, port }) => `${host.includes(':') ? `[${host}]` : host}:${port}`);
  const password = options.sentinelPassword
    ? `&sentinel_password=${encodeURIComponent(options.sentinelPassword)}`
    : '';
  address.search = `sentinels=${list.join(',')}${password}`;
  return address.toString();
}

/** Takes a Redis address apart; throws a RangeError for a Sentinel form without sentinels or master. */
export function parseRedisAddress(address: string): RedisTarget {
  const parsed = URL.canParse(address) ? new URL(address) : undefined;
  if (!parsed || !SENTINEL_PROTOCOLS.has(parsed.protocol)) return { kind: 'url', url: address };
  const masterName = decodeURIComponent(parsed.hostname);
  const sentinels = (parsed.searchParams.get('sentinels') ?? '')
    .split(',')
    .filter(Boolean)
    .map(parseSentinelEndpoint);
  if (!masterName || sentinels.length === 0) {
    throw new RangeError('a Sentinel address names its master and at least one sentinel');
  }
  const db = parsed.pathname.length > 1 ? Number(parsed.pathname.slice(1)) : undefined;
  const sentinelPassword = parsed.searchParams.get('sentinel_password');
  return {
    kind: 'sentinel',
    masterName,
    sentinels,
    tls: parsed.protocol === 'rediss+sentinel:',
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(sentinelPassword ? { sentinelPassword } : {}),
    ...(db === undefined || Number.isNaN(db) ? {} : { db }),
  };
}

/** `address` with every password replaced by `***`, for logs and messages. */
export function redactRedisAddress(address: string): string {
  try {
    const parsed = new URL(address);
    if (!parsed.password && !parsed.searchParams.has('sentinel_password')) return address;
    if (parsed.password) parsed.password = '***';
    if (parsed.searchParams.has('sentinel_password')) parsed.searchParams.set('sentinel_password', '***');
    // URLSearchParams encodes the commas and colons of the sentinel list: keep it readable.
    return decodeURIComponent(parsed.toString());
  } catch {
    return '(unparseable REDIS_URL)';
  }
}
