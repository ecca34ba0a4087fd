import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { sentinelRedisAddress } from '../shared/redis-address.js';
import { terminate, untilReady } from './child-server.js';
import {
  freePort,
  type RedisServer,
  RedisServerError,
  type RedisTlsFiles,
  redisTlsFlags,
  resolveRedisBinary,
  startRedisServer,
} from './redis-server.js';

/** Options of {@link startSentinelGroup}. */
export interface SentinelGroupOptions {
  /** The master group name. Default: `h2h`. */
  masterName?: string;
  /** Sentinels. Default: 3 (a quorum of 2 and a majority to elect the one that fails over). */
  sentinels?: number;
  /**
   * How long a primary may not answer before a sentinel thinks it down (`down-after-milliseconds`).
   * Default: 1000 ms, so a test sees a failover within a few seconds; production uses more.
   */
  downAfterMs?: number;
  /** How long to wait for the group to be ready (every sentinel knowing the replica and the others). Default: 20000 ms. */
  readyTimeoutMs?: number;
  /** TLS only, everywhere (clients, replication, sentinels), with these files. Default: plain TCP. */
  tls?: RedisTlsFiles;
}

/** A private primary, its replica and the sentinels watching them, all on free loopback ports. */
export interface SentinelGroup {
  readonly masterName: string;
  /** The primary at start; after a failover, a replica (or dead). */
  readonly primary: RedisServer;
  /** The replica at start; the one a failover promotes. */
  readonly replica: RedisServer;
  /** The sentinels' `host:port`. */
  readonly sentinels: readonly string[];
  /** The Redis address a component connects with (H2H_REDIS_SENTINELS + H2H_REDIS_SENTINEL_MASTER). */
  readonly address: string;
  /** The port of the server the sentinels name primary now. */
  primaryPort(): Promise<number>;
  /** Stops every process of the group and removes their directories. */
  stop(): Promise<void>;
}

/** The line a sentinel prints once it monitors the primary. */
const SENTINEL_READY = '+monitor master';

type GroupSettings = Required<Omit<SentinelGroupOptions, 'tls'>> & Pick<SentinelGroupOptions, 'tls'>;

async function launchSentinel(binary: string, dir: string, primaryPort: number, options: GroupSettings) {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    // Sentinel rewrites its configuration file (what it learns), so each has its own.
    const file = join(dir, `sentinel-${port}.conf`);
    const name = options.masterName;
    writeFileSync(
      file,
      [
        // The TLS flags as configuration lines ("--tls-port 1" → "tls-port 1").
        ...(options.tls
          ? redisTlsFlags(port, options.tls).flatMap((flag, i, all) =>
              i % 2 === 0 ? [`${flag.slice(2)} ${all[i + 1]}`] : [],
            )
          : [`port ${port}`]),
        'bind 127.0.0.1',
        'daemonize no',
        `dir ${dir}`,
        `sentinel monitor ${name} 127.0.0.1 ${primaryPort} ${Math.floor(options.sentinels / 2) + 1}`,
        `sentinel down-after-milliseconds ${name} ${options.downAfterMs}`,
        `sentinel failover-timeout ${name} ${Math.max(options.downAfterMs * 10, 10_000)}`,
        `sentinel parallel-syncs ${name} 1`,
        '',
      ].join('\n'),
    );
    const child = spawn(binary, [file, '--sentinel'], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      return {
        port,
        child: await untilReady(
          child,
          SENTINEL_READY,
          10_000,
          (why, output) => new RedisServerError(`redis sentinel on port ${port} ${why}:\n${output}`),
        ),
      };
    } catch (error) {
      if (attempt >= 4) throw error;
    }
  }
}

/** Resolves once `probe` is true, asking every 50 ms; rejects with `what` after `timeoutMs`. */
async function until(probe: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe().catch(() => false))) {
    if (Date.now() > deadline)
      throw new RedisServerError(`the sentinel group: ${what} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Starts a primary, one replica of it and `sentinels` sentinels (redis-server's own Sentinel mode,
 * `redis-server <file> --sentinel`), all private to this process, and resolves once the replica is
 * in sync and every sentinel knows the replica and the other sentinels, so that a failover can
 * happen from then on.
 */
export async function startSentinelGroup(options: SentinelGroupOptions = {}): Promise<SentinelGroup> {
  const { tls } = options;
  const settings: GroupSettings = {
    masterName: options.masterName ?? 'h2h',
    sentinels: options.sentinels ?? 3,
    downAfterMs: options.downAfterMs ?? 1_000,
    readyTimeoutMs: options.readyTimeoutMs ?? 20_000,
    ...(tls ? { tls } : {}),
  };
  const clientTls = tls ? { tls: { ca: readFileSync(tls.ca) } } : {};
  const dir = mkdtempSync(join(tmpdir(), 'h2h-sentinel-'));
  const children: ChildProcess[] = [];
  const servers: RedisServer[] = [];
  const clients: Redis[] = [];
  const stop = async () => {
    for (const client of clients) client.disconnect();
    await Promise.all(children.map((child) => terminate(child, 'SIGTERM')));
    await Promise.all(servers.map((server) => server.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const primary = await startRedisServer(tls ? { tls } : {});
    servers.push(primary);
    // Without AOF: a replica ignores SIGTERM while it writes its first AOF after a sync.
    const replica = await startRedisServer({
      ...(tls ? { tls } : {}),
      appendOnly: false,
      args: ['--replicaof', '127.0.0.1', String(primary.port)],
    });
    servers.push(replica);
    const replicaClient = new Redis(replica.port, '127.0.0.1', { lazyConnect: true, ...clientTls });
    clients.push(replicaClient);
    await until(
      async () => /master_link_status:up/.test(await replicaClient.info('replication')),
      settings.readyTimeoutMs,
      'the replica did not sync',
    );
    const binary = resolveRedisBinary();
    const ports: number[] = [];
    for (let i = 0; i < settings.sentinels; i++) {
      const sentinel = await launchSentinel(binary, dir, primary.port, settings);
      children.push(sentinel.child);
      ports.push(sentinel.port);
      clients.push(new Redis(sentinel.port, '127.0.0.1', { lazyConnect: true, ...clientTls }));
    }
    const name = settings.masterName;
    const sentinelClients = clients.slice(1);
    await until(
      async () => {
        for (const client of sentinelClients) {
          const replicas = (await client.call('SENTINEL', 'REPLICAS', name)) as unknown[];
          const others = (await client.call('SENTINEL', 'SENTINELS', name)) as unknown[];
          if (replicas.length < 1 || others.length < settings.sentinels - 1) return false;
        }
        return true;
      },
      settings.readyTimeoutMs,
      'the sentinels did not all learn the replica and each other',
    );
    const sentinels = ports.map((port) => `127.0.0.1:${port}`);
    return {
      masterName: name,
      primary,
      replica,
      sentinels,
      address: sentinelRedisAddress({
        url: tls ? 'rediss://127.0.0.1' : 'redis://127.0.0.1',
        sentinels,
        masterName: name,
      }),
      async primaryPort() {
        for (const client of sentinelClients) {
          const answer = (await client.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name).catch(() => null)) as
            | [string, string]
            | null;
          if (answer) return Number(answer[1]);
        }
        throw new RedisServerError('no sentinel answers');
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
