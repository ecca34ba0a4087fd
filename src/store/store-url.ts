import { resolve } from 'node:path';

/**
 * The store's location (`H2H_DB_URL`, docs/store-backends.md, "Choosing the backend"):
 * `sqlite:///absolute/path`, `sqlite:relative/path` (from the working directory), or
 * `postgres://user@host:port/db` (also `postgresql://`), which may list a primary and its
 * standbys, `postgres://user@host1:port1,host2:port2/db?target_session_attrs=read-write`
 * (docs/deployment.md, "PostgreSQL with a standby").
 */
export type StoreLocation = { backend: 'sqlite'; path: string } | { backend: 'postgres'; url: string };

/** The URL schemes `H2H_DB_URL` accepts. */
export const STORE_URL_PATTERN = /^(sqlite:|postgres:\/\/|postgresql:\/\/)/;

/** Reads a store URL; throws a TypeError naming what is accepted. A SQLite path is made absolute. */
export function parseStoreUrl(url: string): StoreLocation {
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    checkPostgresUrl(url);
    return { backend: 'postgres', url };
  }
  if (url.startsWith('sqlite:')) {
    const rest = url.slice('sqlite:'.length);
    const path = decodeURIComponent(rest.startsWith('//') ? rest.slice(2) : rest);
    if (path === '')
      throw new TypeError('a sqlite: URL needs a file path: sqlite:///absolute/path or sqlite:relative/path');
    return { backend: 'sqlite', path: resolve(path) };
  }
  throw new TypeError(
    `${redactUrl(url)} is not a store URL (shown up to its scheme, since it may hold a password): use sqlite:///absolute/path, sqlite:relative/path or postgres://user@host:port/db`,
  );
}

/** The `target_session_attrs` values the store accepts: it writes, so it needs the writable server. */
const WRITABLE_SESSION_ATTRS = ['read-write', 'primary'];

/**
 * The parts of a PostgreSQL URL: `hosts` is the authority's host list (`host:port,host:port`,
 * one entry for a single host) from `start` to `end`, `single` the URL with only the first host,
 * which `URL` parses.
 */
function splitPostgresUrl(url: string): { hosts: string[]; single: string; start: number; end: number } {
  const afterScheme = url.indexOf('://') + 3;
  const rest = url.slice(afterScheme);
  const authorityEnd = rest.search(/[/?#]/);
  const authority = authorityEnd === -1 ? rest : rest.slice(0, authorityEnd);
  const start = afterScheme + authority.lastIndexOf('@') + 1;
  const end = afterScheme + authority.length;
  const hosts = url.slice(start, end).split(',');
  return { hosts, single: url.slice(0, start) + (hosts[0] ?? '') + url.slice(end), start, end };
}

const validPort = (port: string) => /^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65_535;

/**
 * Refuses a PostgreSQL URL the store cannot use safely, naming the fix: one that does not parse,
 * several hosts without `target_session_attrs=read-write` (the store could write to whichever
 * answers first, a standby), a `target_session_attrs` that admits a read-only server, a host
 * list with an empty entry, a bad port or an IPv6 address (the driver splits each entry at its
 * first `:`).
 */
function checkPostgresUrl(url: string): void {
  const { hosts, single } = splitPostgresUrl(url);
  let parsed: URL;
  try {
    parsed = new URL(single);
  } catch {
    throw new TypeError(
      `${redactUrl(url)} is not a valid PostgreSQL URL: use postgres://user:password@host:port/db ` +
        '(percent-encode a password that holds / ? # @ or :)',
    );
  }
  // One host is the URL's own (an IPv6 one included); a list goes through the driver's split.
  for (const host of hosts.length > 1 ? hosts : []) {
    const [name, port, extra] = host.split(':');
    if (!name || extra !== undefined || host.startsWith('[') || (port !== undefined && !validPort(port))) {
      throw new TypeError(
        `${redactUrl(url)} lists a host "${host}" the store cannot use: give each as name:port or ` +
          'ipv4:port, separated by commas (an IPv6 address needs a host name here)',
      );
    }
  }
  const attrs = parsed.searchParams.get('target_session_attrs');
  if (attrs !== null && attrs !== 'any' && !WRITABLE_SESSION_ATTRS.includes(attrs)) {
    throw new TypeError(
      `${redactUrl(url)} asks for target_session_attrs=${attrs}, but the store writes: use ` +
        'target_session_attrs=read-write (the writable server of those listed)',
    );
  }
  if (hosts.length > 1 && (attrs === null || attrs === 'any')) {
    throw new TypeError(
      `${redactUrl(url)} lists ${hosts.length} hosts without target_session_attrs=read-write: add ` +
        '?target_session_attrs=read-write, so that the store connects to the writable one (the primary), never to a standby',
    );
  }
}

/**
 * What the store asks postgres.js for: `primary` for `read-write` (and for `primary`). The
 * driver's own `read-write` check trusts the `default_transaction_read_only` a server reports
 * when a connection opens, which a hot standby of PostgreSQL 14 or later reports `off`, so it
 * would take a standby (seen here on 15; pg_auto_failover#970); `primary` checks
 * `in_hot_standby`. A primary that is read-only all the same is caught at each write
 * (postgres/postgres-db.ts). Undefined when the URL asks for neither, or `any`.
 */
export function driverSessionAttrs(url: string): 'primary' | undefined {
  const attrs = new URL(splitPostgresUrl(url).single).searchParams.get('target_session_attrs');
  return attrs !== null && WRITABLE_SESSION_ATTRS.includes(attrs) ? 'primary' : undefined;
}

/** The SQLite URL of a file path (`H2H_DB_PATH`'s shorthand): `sqlite://` + the absolute path. */
export function sqliteUrl(path: string): string {
  return `sqlite://${resolve(path)}`;
}

/** Query parameters of a PostgreSQL URL that carry a secret (libpq accepts them). */
const SECRET_PARAMS = ['password', 'sslpassword'];

/**
 * The URL with its password (if any) replaced by `***`: the only form of a store URL that may
 * appear in a log line or an error message. A password in the query string is hidden too; a
 * string that does not parse as a URL shows its scheme only (`postgres://***`), or `***` without
 * one, since where its password would be cannot be told.
 */
export function redactUrl(url: string): string {
  if (url.startsWith('sqlite:')) return url;
  if (/^postgres(ql)?:\/\//.test(url)) {
    // Several hosts (`h1:5432,h2:5432`) are no URL host: redacted with the first one alone,
    // which then gives its place back to the whole list.
    const { hosts, single } = splitPostgresUrl(url);
    if (hosts.length > 1) {
      const redacted = redactUrl(single);
      if (!redacted.includes('@') && redacted.endsWith('***')) return redacted;
      const first = splitPostgresUrl(redacted);
      return redacted.slice(0, first.start) + hosts.join(',') + redacted.slice(first.end);
    }
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0];
    return scheme ? `${scheme}***` : '***';
  }
  if (!parsed.host && !parsed.pathname.startsWith('/')) return `${parsed.protocol}***`;
  if (parsed.password) parsed.password = '***';
  for (const name of SECRET_PARAMS) if (parsed.searchParams.has(name)) parsed.searchParams.set(name, '***');
  return parsed.toString();
}

/** Where a store is, for messages and logs: a SQLite file's path, else the redacted URL. */
export function describeStore(location: StoreLocation): string {
  return location.backend === 'sqlite' ? location.path : redactUrl(location.url);
}
