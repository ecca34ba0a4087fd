import {
  type ChildProcessWithoutNullStreams,
  execFile,
  type SpawnOptionsWithoutStdio,
  spawn,
} from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** The built CLI: what the package's bin runs (dist/, written by scripts/run-tests.mjs before the tests). */
export const BUILT_CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

/** What one CLI run left behind: its exit code and everything it printed. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the CLI as a user would, in a child process, with only PATH and the given settings in its
 * environment. A non-zero exit is returned as `code`, not thrown.
 */
export function runCli(args: string[], env: Record<string, string>): Promise<CliRun> {
  return execCli([], args, env);
}

/** A CLI run, and the npm packages its process loaded (`bullmq`, `@fastify/error`), sorted. */
export interface CliRunModules extends CliRun {
  packages: string[];
}

/**
 * Runs the CLI as {@link runCli} does, with test/helpers/module-log.mjs preloaded to record every
 * module the process loads, and returns the packages among them: each file under `node_modules/`
 * counts for the package of its innermost `node_modules/` folder.
 */
export async function runCliLoggingModules(
  args: string[],
  env: Record<string, string>,
): Promise<CliRunModules> {
  const dir = mkdtempSync(join(tmpdir(), 'h2h-module-log-'));
  const logPath = join(dir, 'modules.log');
  try {
    const run = await execCli(['--import', new URL('./module-log.mjs', import.meta.url).href], args, {
      ...env,
      H2H_TEST_MODULE_LOG: logPath,
    });
    const packages = new Set<string>();
    for (const line of readFileSync(logPath, 'utf8').split('\n')) {
      const name = /.*\/node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(line)?.[1];
      if (name !== undefined) packages.add(name);
    }
    return { ...run, packages: [...packages].sort() };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function execCli(nodeArgs: string[], args: string[], env: Record<string, string>): Promise<CliRun> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, [...nodeArgs, BUILT_CLI, ...args], {
      env: { PATH: process.env.PATH ?? '', ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** A child process a test started, and everything it printed. */
export interface SpawnedProcess {
  child: ChildProcessWithoutNullStreams;
  /**
   * Resolves with the exit code (null after a signal) once its output has ended too, so what it
   * printed is complete then; rejects when the command cannot be started.
   */
  exited: Promise<number | null>;
  /** Everything written so far. */
  stdout(): string;
  stderr(): string;
  /** stdout's complete lines so far, each parsed as JSON. */
  jsonLines<T = Record<string, unknown>>(): T[];
}

/**
 * Starts `command` with `args` in a child process whose stdin, stdout and stderr are pipes, and
 * collects what it prints; it is killed when the test ends if it is still running.
 */
export function spawnProcess(
  t: { after(fn: () => unknown): void },
  command: string,
  args: string[],
  options: SpawnOptionsWithoutStdio = {},
): SpawnedProcess {
  const child = spawn(command, args, { ...options, stdio: 'pipe' });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', (err) => reject(new Error(`${command} cannot run (${err.message})`)));
    child.once('close', (code) => resolve(code));
  });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return {
    child,
    exited,
    stdout: () => stdout,
    stderr: () => stderr,
    jsonLines: <T>() =>
      stdout
        .split('\n')
        .slice(0, -1)
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as T),
  };
}

/**
 * Starts a long-running CLI command (`api`, `tail`, `worker` …) as a user would, with only PATH and the given settings in its environment, and
 * collects what it prints ({@link spawnProcess}).
 */
export function spawnCli(
  t: { after(fn: () => unknown): void },
  args: string[],
  env: Record<string, string>,
): SpawnedProcess {
  return spawnProcess(t, process.execPath, [BUILT_CLI, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
  });
}
