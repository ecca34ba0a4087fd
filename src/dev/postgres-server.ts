import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chownSync,
  closeSync,
  existsSync,
  fchownSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { crashTree, type PrivateServer, terminate, untilReady } from './child-server.js';
import { freePort } from './redis-server.js';

/** Options of {@link startPostgresServer}. */
export interface PostgresServerOptions {
  /**
   * Directory of the cluster (`data/`) and its unix socket (`socket/`). Default: a new temporary
   * directory, removed by `stop()`. A directory that already holds a cluster is started as it is.
   */
  dir?: string;
  /** Port on 127.0.0.1. Default: a free port chosen at start. */
  port?: number;
  /** The database created for the caller (and named in `url`). Default: `h2h`. */
  database?: string;
  /**
   * Directory holding `initdb` and `postgres`. Default: the first directory on PATH that has
   * both, else the newest `/usr/lib/postgresql/<version>/bin` (Debian's layout).
   */
  binDir?: string;
  /** How long to wait for the server to accept connections. Default: 30000 ms. */
  startTimeoutMs?: number;
  /**
   * A cluster to copy for a new one instead of running `initdb` (about 2 s): a directory made by
   * {@link makePostgresTemplate}, whose superuser password the copy keeps. The test runner makes
   * one per run for every test's servers. Default: none (`initdb`).
   */
  template?: string;
}

/**
 * A private PostgreSQL server owned by this process: `url` is
 * `postgres://h2h:<password>@127.0.0.1:<port>/<database>` (a random password made at `initdb`,
 * SCRAM over TCP, so another local user cannot reach the cluster through its port); `stop` is a
 * fast shutdown; `crash` is a lost host (postgres-standby.ts).
 */
export interface PostgresServer extends PrivateServer {
  /**
   * SIGKILLs the postmaster and every process it started at once, as when its machine is lost:
   * no shutdown, no checkpoint, connections cut. `resume()` starts it again (crash recovery).
   */
  crash(): Promise<void>;
}

export class PostgresServerError extends Error {
  override name = 'PostgresServerError';
}

/**
 * The superuser `initdb` creates. Clients connect as it over TCP with its password
 * (scram-sha-256); the unix socket, inside the server's own directory, trusts it.
 */
const SUPERUSER = 'h2h';
const DEBIAN_ROOT = '/usr/lib/postgresql';

const hasServer = (dir: string) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres'));

/** The directory of `initdb` and `postgres`, which must come from the same installation. */
export function findPostgresBinDir(explicit?: string): string {
  if (explicit) {
    if (!hasServer(explicit)) throw new PostgresServerError(`${explicit} has no initdb and postgres`);
    return explicit;
  }
  const onPath = (process.env.PATH ?? '').split(':').filter(Boolean).find(hasServer);
  if (onPath) return onPath;
  const versions = existsSync(DEBIAN_ROOT)
    ? readdirSync(DEBIAN_ROOT)
        .filter((v) => /^\d+$/.test(v) && hasServer(join(DEBIAN_ROOT, v, 'bin')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions[0] === undefined) {
    throw new PostgresServerError(
      'the PostgreSQL server (initdb, postgres) is not installed. Fix: run `npm run setup` ' +
        "(installs Debian's postgresql package), or put a directory with initdb and postgres on PATH",
    );
  }
  return join(DEBIAN_ROOT, versions[0], 'bin');
}

/** The uid and gid the server runs as when this process is root. */
export type ServerAccount = { uid: number; gid: number };

/**
 * Who runs the server. PostgreSQL refuses to run as root, so root hands the cluster to the
 * `postgres` account (Debian's package creates it), else to `nobody`; anyone else runs it as
 * themselves. Node's `spawn` switches uid and gid itself: no runuser or sudo needed.
 */
export function serverAccount(): ServerAccount | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of ['postgres', 'nobody']) {
    try {
      const id = (flag: string) => Number(execFileSync('id', [flag, name], { encoding: 'utf8' }).trim());
      return { uid: id('-u'), gid: id('-g') };
    } catch {
      // no such account: try the next
    }
  }
  throw new PostgresServerError(
    'running as root, and neither a postgres nor a nobody account exists to run PostgreSQL as. ' +
      'Fix: run the tests as a normal user, or create a postgres account (useradd --system postgres)',
  );
}

/** The environment of the server's processes, without PG* variables that could redirect them. */
export function serverEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { LC_ALL: 'C' };
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith('PG') && !key.startsWith('LC_') && key !== 'LANG') env[key] = value;
  }
  return env;
}

/**
 * Creates the cluster. `--no-sync` skips flushing the new files to disk once, at creation
 * (a throwaway cluster); the server itself runs with PostgreSQL's defaults, fsync on, so tests
 * and benches see the commit costs production has.
 */
function initCluster(
  binDir: string,
  dir: string,
  account: { uid: number; gid: number } | undefined,
  pwfile: string,
) {
  const args = ['-D', join(dir, 'data'), '-U', SUPERUSER, `--pwfile=${pwfile}`];
  const auth = ['--auth-local=trust', '--auth-host=scram-sha-256', '--no-locale', '-E', 'UTF8'];
  try {
    execFileSync(join(binDir, 'initdb'), [...args, ...auth, '--no-sync', '--no-instructions'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: serverEnv(),
      ...account,
    });
  } catch (cause) {
    const stderr = String((cause as { stderr?: unknown }).stderr ?? '').slice(-2000);
    throw new PostgresServerError(`initdb in ${dir} failed:\n${stderr}`, { cause });
  } finally {
    rmSync(pwfile, { force: true });
  }
}

/** Writes a new file readable by its owner only (`owner`: given to that account through the descriptor). */
export function writeSecret(path: string, text: string, owner?: { uid: number; gid: number }) {
  rmSync(path, { force: true });
  const fd = openSync(path, 'wx', 0o600);
  try {
    writeFileSync(fd, text);
    if (owner) fchownSync(fd, owner.uid, owner.gid);
  } finally {
    closeSync(fd);
  }
}

/**
 * The superuser's password: made for a new cluster and kept in `<dir>/password` (readable by
 * this process's user only) so that a cluster started again from its directory is reachable.
 * A cluster made before passwords (trust on TCP) has none: undefined.
 */
export function clusterPassword(dir: string): string | undefined {
  const file = join(dir, 'password');
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined;
}

const READY = 'database system is ready to accept connections';
/** A standby's line (hot standby): it takes read-only connections. */
export const READY_READ_ONLY = 'database system is ready to accept read-only connections';
/** Fast shutdown: open transactions are rolled back, clients disconnected. */
const FAST_SHUTDOWN = 'SIGINT';

/** Starts `postgres` on the cluster in `<dir>/data`; resolves once it logged `readyLine`. */
export function launch(
  binDir: string,
  dir: string,
  port: number,
  account: ServerAccount | undefined,
  timeoutMs: number,
  settings: Readonly<Record<string, string>> = {},
  readyLine = READY,
) {
  const args = [
    '-D', join(dir, 'data'),
    '-p', String(port),
    '-c', 'listen_addresses=127.0.0.1',
    '-c', `unix_socket_directories=${join(dir, 'socket')}`,
    '-c', 'logging_collector=off',
    '-c', 'max_connections=200',
    ...Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
  ]; // biome-ignore format: one flag per line pair reads best
  const child = spawn(join(binDir, 'postgres'), args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: serverEnv(),
    ...account,
  });
  // The server logs to stderr (logging_collector off).
  return untilReady(
    child,
    readyLine,
    timeoutMs,
    (why, output) => new PostgresServerError(`postgres on port ${port} ${why}:\n${output}`),
  );
}

/**
 * Creates the caller's database, over TCP as a client would: the proof that the server accepts
 * connections, beyond its log line.
 */
async function createDatabase(port: number, password: string | undefined, database: string): Promise<void> {
  const admin = postgres({
    host: '127.0.0.1',
    port,
    username: SUPERUSER,
    password,
    database: 'postgres',
    max: 1,
    onnotice: () => {},
  });
  try {
    const [found] = await admin`SELECT 1 FROM pg_database WHERE datname = ${database}`;
    if (!found) await admin.unsafe(`CREATE DATABASE "${database.replaceAll('"', '""')}"`);
  } finally {
    await admin.end();
  }
}

/**
 * Makes a new cluster in `dir` (`data/`, `socket/`, the superuser's `password`) with `initdb`.
 * The password files are made while the directory is still this process's alone (before it is
 * handed to the server's account, which could otherwise plant a symlink), each created anew
 * ('wx'), never through an existing file.
 */
function createCluster(binDir: string, dir: string, account: ServerAccount | undefined): void {
  const pwfile = join(dir, 'initdb-password');
  const made = randomBytes(18).toString('base64url');
  writeSecret(join(dir, 'password'), made);
  // initdb reads the superuser's password from a file, as the server's account: written for it
  // alone and removed right after initdb.
  writeSecret(pwfile, `${made}\n`, account);
  handOver(dir, account);
  initCluster(binDir, dir, account, pwfile);
}

/** Makes `dir` a copy of the cluster `template` ({@link makePostgresTemplate}), owners and modes kept. */
function copyCluster(template: string, dir: string, account: ServerAccount | undefined): void {
  writeSecret(join(dir, 'password'), readFileSync(join(template, 'password'), 'utf8'));
  handOver(dir, account);
  execFileSync('cp', ['-a', join(template, 'data'), join(dir, 'data')]);
}

/** Makes the cluster directory's socket folder and gives both to the server's account. */
function handOver(dir: string, account: ServerAccount | undefined): void {
  mkdirSync(join(dir, 'socket'), { recursive: true });
  if (account) {
    for (const owned of [dir, join(dir, 'socket')]) chownSync(owned, account.uid, account.gid);
  }
}

/**
 * Makes a cluster in `dir` (empty, or made here) that {@link startPostgresServer}'s `template`
 * copies, so that many servers cost one `initdb`: the test runner's, once per run. `dir` is handed
 * to the server's account, so its parent must let that account through (a new folder of the
 * system's temporary directory does: `mkdtempSync(join(tmpdir(), …))`).
 */
export function makePostgresTemplate(dir: string, binDir?: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  createCluster(findPostgresBinDir(binDir), dir, serverAccount());
}

/**
 * Starts a private PostgreSQL server on 127.0.0.1 (never one already running): `initdb` in a
 * temporary directory (the superuser `h2h` with a random password over TCP, trusted on its unix
 * socket inside the directory), `postgres` on a free port, then creates `database`. Retries on another port if the
 * chosen one was taken in the meantime. When this process is root the server runs as the
 * `postgres` (else `nobody`) account, since PostgreSQL refuses root.
 */
export async function startPostgresServer(options: PostgresServerOptions = {}): Promise<PostgresServer> {
  const binDir = findPostgresBinDir(options.binDir);
  const account = serverAccount();
  const ownsDir = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'h2h-postgres-'));
  const database = options.database ?? 'h2h';
  const timeoutMs = options.startTimeoutMs ?? 30_000;
  const removeOwnDir = () => {
    if (ownsDir) rmSync(dir, { recursive: true, force: true });
  };
  let port = options.port ?? 0;
  let child: ChildProcess | undefined;
  try {
    if (!ownsDir) mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (existsSync(join(dir, 'data', 'PG_VERSION'))) handOver(dir, account);
    else if (options.template === undefined) createCluster(binDir, dir, account);
    else copyCluster(options.template, dir, account);
    for (let attempt = 0; !child; attempt++) {
      const tryPort = port || (await freePort());
      try {
        child = await launch(binDir, dir, tryPort, account, timeoutMs);
        port = tryPort;
      } catch (err) {
        if (options.port !== undefined || attempt >= 4) throw err;
      }
    }
    await createDatabase(port, clusterPassword(dir), database);
  } catch (err) {
    if (child) await terminate(child, FAST_SHUTDOWN);
    removeOwnDir();
    throw err;
  }
  const stopChild = async () => {
    if (child) await terminate(child, FAST_SHUTDOWN);
  };
  const password = clusterPassword(dir);
  const credentials = password === undefined ? SUPERUSER : `${SUPERUSER}:${password}`;
  return {
    url: `postgres://${credentials}@127.0.0.1:${port}/${database}`,
    port,
    dir,
    pause: stopChild,
    async resume() {
      await stopChild();
      child = await launch(binDir, dir, port, account, timeoutMs);
    },
    async crash() {
      if (child) await crashTree(child);
    },
    async stop() {
      await stopChild();
      removeOwnDir();
    },
  };
}
