import { type ChildProcess, execFile } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { crashTree, terminate } from './child-server.js';
import {
  clusterPassword,
  findPostgresBinDir,
  launch,
  type PostgresServer,
  PostgresServerError,
  READY_READ_ONLY,
  serverAccount,
  serverEnv,
  startPostgresServer,
  writeSecret,
} from './postgres-server.js';
import { freePort } from './redis-server.js';

const run = promisify(execFile);

/** The start of both lines a server logs when it takes connections (read-only or not). */
const READY_EITHER = 'database system is ready to accept';

/**
 * The standby's name (its `cluster_name`, which its WAL receiver gives the primary as its
 * `application_name`), named in the primary's `synchronous_standby_names`.
 */
export const STANDBY_NAME = 'h2h_standby';

/** A private primary and its streaming standby (see {@link startPostgresPair}). */
export interface PostgresPair {
  primary: PostgresServer;
  standby: PostgresStandby;
  /** Stops both servers and removes their directories. */
  stop(): Promise<void>;
}

/** A streaming standby: read-only until {@link PostgresStandby.promote}. */
export interface PostgresStandby extends PostgresServer {
  /** `pg_ctl promote -w`: ends recovery; resolves once the server accepts writes. */
  promote(): Promise<void>;
}

/**
 * Starts a private primary and a streaming standby of it on free ports, both on 127.0.0.1 with
 * the same superuser and password: the standby is a `pg_basebackup -R` of the primary, and
 * with `synchronous: true` (the default) the primary's `synchronous_standby_names` names it,
 * so that a COMMIT returns only once the standby has flushed its WAL (`synchronous_commit=on`):
 * every commit a client saw is on the standby too. The standby is hot (it takes read-only
 * connections).
 */
export async function startPostgresPair({
  synchronous = true,
  startTimeoutMs = 30_000,
}: {
  synchronous?: boolean;
  startTimeoutMs?: number;
} = {}): Promise<PostgresPair> {
  const primary = await startPostgresServer({ startTimeoutMs });
  let standby: PostgresStandby;
  try {
    standby = await startStandby(primary, startTimeoutMs);
    // Set once the standby streams (before, every commit would wait for it), as an operator
    // adds a synchronous standby to a running primary; kept in postgresql.auto.conf.
    if (synchronous) await requireStandby(primary.url);
  } catch (error) {
    await primary.stop();
    throw error;
  }
  return {
    primary,
    standby,
    async stop() {
      await Promise.all([standby.stop(), primary.stop()]);
    },
  };
}

/**
 * A client tool of the installation `postgres` comes from: next to it in `binDir`, else next to
 * the file it links to (`initdb` and `postgres` alone may be linked onto PATH).
 */
function serverTool(binDir: string, name: string): string {
  const direct = join(binDir, name);
  if (existsSync(direct)) return direct;
  const beside = join(dirname(realpathSync(join(binDir, 'postgres'))), name);
  if (existsSync(beside)) return beside;
  throw new PostgresServerError(`${name} is not installed next to ${binDir}/postgres`);
}

/** Makes the standby synchronous, and waits until the primary reports it so. */
async function requireStandby(primaryUrl: string): Promise<void> {
  const admin = postgres(primaryUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (${STANDBY_NAME})'`);
    await admin`SELECT pg_reload_conf()`;
    for (;;) {
      const [row] =
        await admin`SELECT 1 FROM pg_stat_replication WHERE application_name = ${STANDBY_NAME} AND sync_state = 'sync'`;
      if (row) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await admin.end();
  }
}

async function startStandby(primary: PostgresServer, timeoutMs: number): Promise<PostgresStandby> {
  const binDir = findPostgresBinDir();
  const account = serverAccount();
  const dir = mkdtempSync(join(tmpdir(), 'h2h-postgres-standby-'));
  const password = clusterPassword(primary.dir);
  const port = await freePort();
  const settings = { cluster_name: STANDBY_NAME };
  let child: ChildProcess | undefined;
  try {
    if (password !== undefined) writeSecret(join(dir, 'password'), password);
    mkdirSync(join(dir, 'socket'));
    if (account) for (const owned of [dir, join(dir, 'socket')]) chownSync(owned, account.uid, account.gid);
    // -R writes standby.signal and primary_conninfo (with the password it connected with).
    const args = ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'h2h', '-D', join(dir, 'data')];
    try {
      await run(
        serverTool(binDir, 'pg_basebackup'),
        [...args, '-R', '-X', 'stream', '-c', 'fast', '--no-sync'],
        {
          env: { ...serverEnv(), ...(password === undefined ? {} : { PGPASSWORD: password }) },
          ...account,
        },
      );
    } catch (cause) {
      const stderr = String((cause as { stderr?: unknown }).stderr ?? '').slice(-2000);
      throw new PostgresServerError(`pg_basebackup of port ${primary.port} failed:\n${stderr}`, { cause });
    }
    child = await launch(binDir, dir, port, account, timeoutMs, settings, READY_READ_ONLY);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const stopChild = async () => {
    if (child) await terminate(child, 'SIGINT');
  };
  return {
    url: primary.url.replace(`:${primary.port}/`, `:${port}/`),
    port,
    dir,
    pause: stopChild,
    async resume() {
      await stopChild();
      // Read-only while in recovery, read-write once promoted: either line means it is up.
      child = await launch(binDir, dir, port, account, timeoutMs, settings, READY_EITHER);
    },
    async crash() {
      if (child) await crashTree(child);
    },
    async promote() {
      try {
        await run(serverTool(binDir, 'pg_ctl'), ['promote', '-w', '-D', join(dir, 'data')], {
          env: serverEnv(),
          ...account,
        });
      } catch (cause) {
        const stderr = String((cause as { stderr?: unknown }).stderr ?? '').slice(-2000);
        throw new PostgresServerError(`pg_ctl promote on port ${port} failed:\n${stderr}`, { cause });
      }
    },
    async stop() {
      await stopChild();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
