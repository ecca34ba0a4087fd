import type { ChildProcess } from 'node:child_process';

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
