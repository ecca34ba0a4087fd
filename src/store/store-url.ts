import { resolve } from 'node:path';

/**
 * The store's location (`H2H_DB_URL`, docs/store-backends.md, "Choosing the backend"):
 * `sqlite:///absolute/path`, `sqlite:relative/path` (from the working directory), or
 * `postgres://user@host:port/db` (also `postgresql://`).
 */
export type StoreLocation = { backend: 'sqlite'; path: string } | { backend: 'postgres'; url: string };

/** The URL schemes `H2H_DB_URL` accepts. */
export const STORE_URL_PATTERN = /^(sqlite:|postgres:\/\/|postgresql:\/\/)/;

/** Reads a store URL; throws a TypeError naming what is accepted. A SQLite path is made absolute. */
export function parseStoreUrl(url: string): StoreLocation {
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) return { backend: 'postgres', url };
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
