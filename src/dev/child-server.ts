import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/**
 * The lifecycle both private servers of tests and the demo share (redis-server.ts,
 * postgres-server.ts): wait for the line that says the server is ready, stop it with a signal,
 * and kill whatever this process started if it exits without stopping it.
 */

/** A private server (redis-server, postgres) this process started, and its lifecycle. */
export interface PrivateServer {
  /** How clients connect to it. */
  readonly url: string;
  readonly port: number;
  /** Its data directory. */
  readonly dir: string;
  /** Stops the server, data kept, so that a test can simulate an outage. */
  pause(): Promise<void>;
  /** Starts it again on the same port and data. */
  resume(): Promise<void>;
  /** Stops the server and removes a temporary data directory. */
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/**
 * Resolves with `child` once its output (stdout or stderr) contains `readyLine`; rejects with
 * `fail(why, lastOutput)` when it exits, cannot start, or stays silent for `timeoutMs`. The child
 * is killed on failure, and killed when this process exits while it still runs.
 */
export function untilReady(
  child: ChildProcess,
  readyLine: string,
  timeoutMs: number,
  fail: (why: string, output: string) => Error,
): Promise<ChildProcess> {
  running.add(child);
  child.once('exit', () => running.delete(child));
  return new Promise<ChildProcess>((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => failWith(`was not ready within ${timeoutMs} ms`), timeoutMs);
    const failWith = (why: string) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(fail(why, output.slice(-2000)));
    };
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(readyLine)) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        child.stderr?.off('data', onData);
        child.off('exit', onExit);
        child.stdout?.resume();
        child.stderr?.resume();
        resolve(child);
      }
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
      failWith(`exited with ${signal ?? `code ${code}`}`);
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('error', (err) => failWith(`could not start (${err.message})`));
    child.once('exit', onExit);
  });
}

/** Stops `child` with `signal` and resolves when it has exited. */
export function terminate(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill(signal);
  });
}

/** The state letter and parent pid of a process (from /proc), or undefined once it is gone. */
function procStat(pid: number): { state: string; ppid: number } | undefined {
  try {
    // `pid (comm) S ppid …`: comm may hold spaces and parentheses, so read after the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: state ?? '', ppid: Number(ppid) };
  } catch {
    return undefined;
  }
}

/**
 * SIGKILLs `child` and its own children at once (Linux: read from /proc), as when the machine
 * they run on is lost, and resolves once each of them has exited (a zombie counts: its sockets
 * are closed). The child is stopped (SIGSTOP) first, so that it starts no process meanwhile.
 */
export async function crashTree(child: ChildProcess): Promise<void> {
  const pid = child.pid;
  if (pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  process.kill(pid, 'SIGSTOP');
  const children = readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((other) => procStat(other)?.ppid === pid);
  for (const other of [pid, ...children]) {
    try {
      process.kill(other, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await exited;
  for (const other of children) {
    while (![undefined, 'Z', 'X'].includes(procStat(other)?.state)) {
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
}
