import type { Logger } from 'pino';
import {
  type Config,
  catalogSettings,
  failoverSettings,
  loadConfig,
  reconcilerSettings,
} from '../config/config.js';
import { createLogger } from '../observability/logger.js';
import { type OpenedStore, openStore } from '../store/open-store.js';
import { type ClaimingStore, withClaims } from '../store/order-store.js';
import type { Upstream } from '../upstream/create-upstream.js';
import { DEFAULT_UPSTREAM } from '../upstream/model.js';

/** What a CLI command works with; open only the parts it needs and `close()` them at the end. */
export interface CliContext {
  config: Config;
  logger: Logger;
  /** The default upstream's client, its rate budget and their Redis (with `upstream`). */
  upstream?: Upstream;
  /**
   * The client of the upstream named `name` (docs/upstreams.md), opened on first use and closed
   * with the context; a name the configuration does not know throws a ConfigError naming the
   * known ones.
   */
  openUpstream(name: string): Promise<Upstream>;
  /** With the claims on orders (`withClaims`): the CLI's polls and creates claim orders with them. */
  store?: ClaimingStore<OpenedStore>;
  close(): Promise<void>;
}

export interface OpenContextOptions {
  /** Calls the upstream: needs H2H_BASE_URL, H2H_API_KEY and the shared rate budget in Redis. */
  upstream?: boolean;
  /**
   * Opens the order store (H2H_DB_URL, or H2H_DB_PATH): `'existing'` for commands about orders
   * already placed (they refuse to create a store: "no store at PATH: set H2H_DB_URL", exit 2, instead of
   * answering from a new empty one), `'create'` for the one that may place the first order.
   */
  store?: 'existing' | 'create';
  /** CLI log level (logs go to stderr; the command prints its own outcome). Default: `error`. */
  logLevel?: string;
}

/** Loads the config and opens what the command needs. */
export async function openContext(options: OpenContextOptions): Promise<CliContext> {
  const config = loadConfig();
  const logger = createLogger({
    level: options.logLevel ?? 'error',
    name: 'cli',
    format: config.logFormat,
    destination: process.stderr,
  });
  const closers: Array<() => Promise<void> | void> = [];
  const opened = new Map<string, Promise<Upstream>>();
  const context: CliContext = {
    config,
    logger,
    openUpstream(name) {
      let upstream = opened.get(name);
      if (!upstream) {
        // Loaded here: the client and its budget's Redis (undici, ioredis) are only for the
        // commands that call the upstream.
        upstream = import('../upstream/create-upstream.js').then(
          async ({ createUpstream, upstreamAccount }) => {
            const created = await createUpstream(config, upstreamAccount(config, name), { logger });
            closers.push(() => created.close());
            return created;
          },
        );
        opened.set(name, upstream);
        upstream.catch(() => opened.delete(name));
      }
      return upstream;
    },
    async close() {
      for (const close of closers.reverse()) await close();
    },
  };
  try {
    if (options.store) {
      const store = await openStore(config.dbUrl, {
        role: 'cli',
        lockTimeoutMs: config.dbLockTimeoutMs,
        poolMax: config.dbPoolMax,
        mustExist: options.store === 'existing',
        balanceLowThreshold: catalogSettings(config).balanceLowThreshold,
        balanceDriftThreshold: catalogSettings(config).balanceDriftThreshold,
        failover: failoverSettings(config),
        productLinks: catalogSettings(config).productLinks,
      });
      closers.push(() => store.close());
      context.store = withClaims(store, reconcilerSettings(config));
    }
    if (options.upstream) context.upstream = await context.openUpstream(DEFAULT_UPSTREAM);
    return context;
  } catch (err) {
    await context.close();
    throw err;
  }
}
