// Builds dist/ (the CLI the tests start as child processes, as the package's bin and pm2 run it)
// and the test build (scripts/test-build/: src/ and test/ transpiled, loaded under their .ts URLs),
// then runs every test/**/*.test.ts file with Node's test runner, two files at a time, with the
// spec report, and prints how long each file took and the total.
//
//   node scripts/run-tests.mjs [path-substring]   e.g. `queue`, `test/worker/crash`
//
// Each file has FILE_TIMEOUT_MS to finish, on every Node line: past it the run stops and names the
// file and the tests still running in it (or says that its tests finished but its process did not
// exit: an open handle). `--test-timeout` is not used for this because it means a file's time on
// Node 20 but each test's time on Node 22 and later, where a file kept alive by an open handle
// would then wait forever. Tests whose proof is that something finishes set their own
// `{ timeout }` as well (docs/development.md).
import { spawnSync } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { finished } from 'node:stream/promises';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import { fileURLToPath } from 'node:url';
import { updateTestBuild } from './test-build/build.mjs';

/** How long one test file may take before the run stops. The slowest file takes about 30 s here. */
const FILE_TIMEOUT_MS = 180_000;
/**
 * Test files run at the same time (each in its own process). The suite is bound by CPU (every
 * file and child process starts Node): on 2 cores, 4 at a time took longer than 2.
 */
const CONCURRENCY = 2;

// The test files are TypeScript, loaded from the test build: the runner's child processes
// inherit `--import` of its loader from this process on Node 20 (whose run() has no execArgv
// option) and on later lines alike. It replaced `--import tsx`, which cost each test process about
// half a second of CPU (tsx's loader thread and esbuild), a tenth of the suite's.
const LOADER = new URL('./test-build/register.mjs', import.meta.url).href;
const loaderImported = process.execArgv.some(
  (arg, i) => arg === `--import=${LOADER}` || (arg === LOADER && process.execArgv[i - 1] === '--import'),
);
if (!loaderImported) {
  const self = fileURLToPath(import.meta.url);
  const child = spawnSync(process.execPath, ['--import', LOADER, self, ...process.argv.slice(2)], {
    stdio: 'inherit',
  });
  process.exit(child.status ?? 1);
}
await updateTestBuild();

// Child processes run the built CLI (test/helpers/cli.ts, BUILT_CLI): a process started through
// tsx spends about half a second of CPU more, which over the suite's few hundred was a third of
// its time. tsc's incremental build still parses every file (about 7 s of CPU with nothing
// changed), so it is skipped when no source or tsconfig is newer than its last build.
if (!isDistCurrent()) {
  const build = spawnSync(
    process.execPath,
    ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'],
    {
      stdio: 'inherit',
    },
  );
  // tsc leaves its build info as it was when nothing changed (a file only touched, say); a failed
  // build is marked old, so that the next run builds again and shows the errors.
  const stamp = build.status === 0 ? new Date() : new Date(0);
  if (existsSync('dist/.tsbuildinfo')) utimesSync('dist/.tsbuildinfo', stamp, stamp);
  if (build.status !== 0) {
    console.error('the build of dist/ failed (above): the tests start the built CLI');
    process.exit(1);
  }
}

/** True when dist/ was built (dist/.tsbuildinfo written) after every file of src/ and both tsconfigs changed. */
function isDistCurrent() {
  const built = statSync('dist/.tsbuildinfo', { throwIfNoEntry: false })?.mtimeMs;
  if (built === undefined) return false;
  const inputs = [
    'tsconfig.json',
    'tsconfig.build.json',
    ...readdirSync('src', { recursive: true }).map((f) => `src/${String(f)}`),
  ];
  return inputs.every((path) => statSync(path).mtimeMs <= built);
}

// Every file whose path contains one of the arguments; no argument: every file.
const filters = process.argv.slice(2);
const files = readdirSync('test', { recursive: true })
  .map((f) => `test/${String(f)}`)
  .filter((f) => f.endsWith('.test.ts') && (filters.length === 0 || filters.some((x) => f.includes(x))))
  .sort();
if (files.length === 0) {
  console.error(`no test files match ${filters.join(' or ') || 'test/**/*.test.ts'}`);
  process.exit(1);
}

// One initdb for the run (about 2 s): every test's private PostgreSQL server starts from a copy of
// it (test/helpers/postgres.ts), which some fifty files would otherwise each pay. Without a
// PostgreSQL installation the tests that need one say so themselves.
const pgTemplate = await makePgTemplate();
if (pgTemplate) {
  process.env.H2H_TEST_POSTGRES_TEMPLATE = pgTemplate;
  // However the run ends (a failure, a file past its time, process.exit), short of a signal.
  process.on('exit', () => rmSync(pgTemplate, { recursive: true, force: true }));
}

async function makePgTemplate() {
  const { makePostgresTemplate } = await import('../src/dev/postgres-server.js');
  const dir = mkdtempSync(join(tmpdir(), 'h2h-postgres-template-'));
  try {
    makePostgresTemplate(dir);
    return dir;
  } catch (error) {
    console.error(`no PostgreSQL template cluster for this run (each server runs initdb): ${error.message}`);
    rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
}

const controller = new AbortController();
// run() adds one abort listener per file to the signal; that many is expected, not a leak.
setMaxListeners(files.length + 10, controller.signal);
/** Per file (absolute path): when it started, its ceiling timer, and the tests running now. */
const running = new Map();
/** [file, ms] of every file that finished. */
const timings = [];
const started = performance.now();

/** True for the runner's own event about a whole file (its name is the file's path). */
const isFileEvent = (data) =>
  data.nesting === 0 && data.file !== undefined && resolve(data.name) === data.file;

function stopRun(file) {
  const tests = [...running.get(file).tests];
  const reason = new Error(
    `${relative('.', file)} did not finish within ${FILE_TIMEOUT_MS / 1000} s: ` +
      (tests.length > 0
        ? `still running ${tests.map((name) => JSON.stringify(name)).join(', ')}`
        : 'its tests finished but its process did not exit (an open handle: a server, connection or timer left open)') +
      '. The run is stopped.',
  );
  console.error(`\n✖ ${reason.message}\n`);
  controller.abort(reason);
}

const stream = run({ files, concurrency: CONCURRENCY, signal: controller.signal });
stream.on('test:dequeue', (data) => {
  if (isFileEvent(data)) {
    const timer = setTimeout(() => stopRun(data.file), FILE_TIMEOUT_MS);
    running.set(data.file, { timer, tests: new Set() });
  } else {
    running.get(data.file)?.tests.add(data.name);
  }
});
stream.on('test:complete', (data) => {
  const file = running.get(data.file);
  if (!isFileEvent(data)) {
    file?.tests.delete(data.name);
    return;
  }
  clearTimeout(file?.timer);
  running.delete(data.file);
  timings.push([relative('.', data.file), data.details.duration_ms]);
});
stream.on('test:fail', () => {
  process.exitCode = 1;
});

const report = stream.compose(spec);
report.pipe(process.stdout);
await finished(report);
for (const { timer } of running.values()) clearTimeout(timer);

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
const width = Math.max(...timings.map(([, ms]) => seconds(ms).length));
console.log('\nTest files by duration, slowest first:');
for (const [file, ms] of timings.sort((a, b) => b[1] - a[1])) {
  console.log(`  ${seconds(ms).padStart(width)}  ${file}`);
}
const sum = timings.reduce((total, [, ms]) => total + ms, 0);
console.log(
  `${timings.length} of ${files.length} files in ${seconds(performance.now() - started)} ` +
    `(${seconds(sum)} of file time, ${CONCURRENCY} files at a time), Node ${process.version}`,
);
if (timings.length < files.length) process.exitCode = 1;
