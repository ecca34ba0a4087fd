import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type PrivateServer, terminate, untilReady } from './child-server.js';

/** Options of {@link startRedisServer}. */
export interface RedisServerOptions {
  /** Data directory. Default: a new temporary directory, removed by `stop()`. */
  dir?: string;
  /** Port on 127.0.0.1. Default: a free port chosen at start. */
  port?: number;
  /** Append-only file persistence, as production wants it. Default: `true`. */
  appendOnly?: boolean;
  /** redis-server binary. Default: `redis-server` on PATH, else `/usr/bin/redis-server`. */
  binary?: string;
  /** How long to wait for "Ready to accept connections". Default: 10000 ms. */
  startTimeoutMs?: number;
  /** More redis-server flags, e.g. `['--replicaof', '127.0.0.1', '6380']`. Default: none. */
  args?: readonly string[];
  /** TLS only, on the port (`rediss://`), with these files. Default: plain TCP. */
  tls?: RedisTlsFiles;
}

/** PEM files of a TLS Redis: its certificate and key, and the CA that signed it. */
export interface RedisTlsFiles {
  cert: string;
  key: string;
  ca: string;
}

/**
 * The flags that make a redis-server (or sentinel) serve TLS only, on `port`, and use TLS to
 * its primary and to the servers it watches; clients need no certificate of their own.
 */
export function redisTlsFlags(port: number, tls: RedisTlsFiles): string[] {
  return [
    '--tls-port', String(port),
    '--port', '0',
    '--tls-cert-file', tls.cert,
    '--tls-key-file', tls.key,
    '--tls-ca-cert-file', tls.ca,
    '--tls-auth-clients', 'no',
    '--tls-replication', 'yes',
  ]; // biome-ignore format: one flag per line pair reads best
}

/** A private redis-server process owned by this process (`redis://127.0.0.1:<port>`, `rediss://` with TLS). */
export interface RedisServer extends PrivateServer {
  /** Kills the server with SIGKILL, as a crash would: no shutdown, no last write to disk. */
  kill(): Promise<void>;
}

export class RedisServerError extends Error {
  override name = 'RedisServerError';
}

/** The redis-server binary: `explicit`, else the one on PATH, else the usual places; throws naming the fix. */
export function resolveRedisBinary(explicit?: string): string {
  if (explicit) return explicit;
  const onPath = (process.env.PATH ?? '')
    .split(':')
    .map((d) => join(d, 'redis-server'))
    .find((p) => existsSync(p));
  const binary =
    onPath ?? ['/usr/bin/redis-server', '/usr/local/bin/redis-server'].find((p) => existsSync(p));
  if (!binary) {
    throw new RedisServerError(
      'redis-server is not installed. Fix: run `npm run setup` (installs it with apt-get)',
    );
  }
  return binary;
}

/** Asks the kernel for a port that is free right now on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject()));
    });
  });
}

function launch(
  binary: string,
  dir: string,
  port: number,
  appendOnly: boolean,
  timeoutMs: number,
  extra: readonly string[],
  tls: RedisTlsFiles | undefined,
) {
  const args = [
    '--port', String(port),
    '--bind', '127.0.0.1',
    '--dir', dir,
    '--save', '',
    '--appendonly', appendOnly ? 'yes' : 'no',
    '--appendfsync', 'everysec',
    '--maxmemory-policy', 'noeviction',
    '--daemonize', 'no',
    '--protected-mode', 'yes',
    '--logfile', '',
    // A replica that attaches is sent the data at once, not after the default 5 s wait for others.
    '--repl-diskless-sync-delay', '0',
    ...(tls ? redisTlsFlags(port, tls) : []),
    ...extra,
  ]; // biome-ignore format: one flag per line pair reads best
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  return untilReady(
    child,
    'Ready to accept connections',
    timeoutMs,
    (why, output) => new RedisServerError(`redis-server on port ${port} ${why}:\n${output}`),
  );
}

/**
 * Starts a private redis-server on 127.0.0.1 (never one already running), with
 * `maxmemory-policy noeviction` as BullMQ requires. Retries on another port if the chosen
 * one was taken in the meantime.
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const binary = resolveRedisBinary(options.binary);
  const ownsDir = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'h2h-redis-'));
  mkdirSync(dir, { recursive: true });
  const appendOnly = options.appendOnly ?? true;
  const timeoutMs = options.startTimeoutMs ?? 10_000;
  const extra = options.args ?? [];
  let port = options.port ?? 0;
  let child: ChildProcess | undefined;
  for (let attempt = 0; !child; attempt++) {
    const tryPort = port || (await freePort());
    try {
      child = await launch(binary, dir, tryPort, appendOnly, timeoutMs, extra, options.tls);
      port = tryPort;
    } catch (err) {
      if (options.port !== undefined || attempt >= 4) {
        if (ownsDir) rmSync(dir, { recursive: true, force: true });
        throw err;
      }
    }
  }
  const stopChild = async () => {
    if (child) await terminate(child, 'SIGTERM');
  };
  const kill = async () => {
    if (child) await terminate(child, 'SIGKILL');
  };
  return {
    url: `${options.tls ? 'rediss' : 'redis'}://127.0.0.1:${port}`,
    port,
    dir,
    pause: stopChild,
    kill,
    async resume() {
      await stopChild();
      child = await launch(binary, dir, port, appendOnly, timeoutMs, extra, options.tls);
    },
    async stop() {
      await stopChild();
      if (ownsDir) rmSync(dir, { recursive: true, force: true });
    },
  };
}
