import { z } from 'zod';
import type { LogFormat, LogLevel } from '../observability/defaults.js';

/**
 * What every component's settings section (`src/<component>/settings.ts`) builds on: the
 * variable types and the values several sections share. A leaf module, like the sections: it
 * imports zod and nothing that loads a package (docs/cli.md, "Adding a command").
 */

/** A whole number from the environment, at least `min`. */
export const int = (min: number) => z.coerce.number().int().min(min);

/** An HTTP header name, compared in lower case as Node delivers them. */
export const header = z
  .string()
  .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'must be an HTTP header name')
  .transform((name) => name.toLowerCase());

/** A comma-separated list, each entry trimmed, empty ones dropped. */
export const list = z.string().transform((s) =>
  s
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean),
);

export const LOOPBACK = '127.0.0.1';

/** The values that several sections share, derived by `loadConfig` (src/config/config.ts). */
export interface SharedSettings {
  /**
   * Where Redis is: `REDIS_URL`, or the Sentinel address composed from `H2H_REDIS_SENTINELS`
   * (src/shared/redis-address.ts). Every connection is made from it by `createRedis`.
   */
  redisUrl: string;
  /** The order store's URL (`H2H_DB_URL`, or `sqlite://` + `H2H_DB_PATH`, or the default file). */
  dbUrl: string;
  /** The wait for another process's write lock, ms (`H2H_DB_LOCK_TIMEOUT_MS`). */
  dbLockTimeoutMs: number;
  /** PostgreSQL connections per process (`H2H_DB_POOL_MAX`). */
  dbPoolMax: number;
  logLevel: LogLevel;
  logFormat: LogFormat;
}
