/**
 * The two goals of the shop notifications (docs/performance.md, "Notifications"), each a run of
 * bench/notify.ts:
 * 1. latency: at 50 events/s (ten times a busy upstream account) for 30 s, p99 from commit to
 *    the shop's 2xx under 100 ms;
 * 2. throughput: the highest rate sustained for 60 s, stepping up from `--from` by `--step`
 *    events/s until a run is not sustained (a run sustains when every event arrived once, the
 *    commits kept the rate and the last 10 s of events still arrived within a second: a backlog
 *    that grows shows as latency that grows); goal at least 500 events/s.
 *
 * `--before REV` runs the same steps with the code of git revision REV too (extracted with
 * `git archive` under var/, sharing this checkout's node_modules: REV must have the same
 * dependencies), one after the other in this run, and prints both side by side. Its bench is
 * its own bench/notify.ts, read through the flags and the CSV timeline both versions share.
 *
 *   npm run bench:notify-goals -- [--before REV] [--from 250] [--step 250] [--max 2000] [--json]
 */
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values: flags } = parseArgs({
  options: {
    before: { type: 'string' },
    from: { type: 'string', default: '250' },
    step: { type: 'string', default: '250' },
    max: { type: 'string', default: '2000' },
    json: { type: 'boolean', default: false },
  },
});

const LATENCY_RATE = 50;
const LATENCY_GOAL_MS = 100;
const SUSTAIN_S = 60;
const SUSTAIN_GOAL = 500;
/** The p99 of the last 10 s of a run under which it counts as sustained. */
const SUSTAINED_P99_MS = 1_000;

interface Run {
  rate: number;
  achievedRate: number;
  p50Ms: number;
  p99Ms: number;
  lost: number;
  doubled: number;
  unverified: number;
  /** p99 latency of the events committed in the run's last 10 s, from its timeline. */
  lastTenSecondsP99Ms: number;
  sustained: boolean;
}

const quantile = (sorted: readonly number[], p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;

/** One run of `tree`'s bench/notify.ts at `rate` for `durationS`. */
async function run(tree: string, rate: number, durationS: number): Promise<Run> {
  const timeline = join(tree, 'var', `timeline-${rate}.csv`);
  mkdirSync(join(tree, 'var'), { recursive: true });
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'bench/notify.ts',
      ...['--rate', String(rate), '--duration', String(durationS), '--max-p99', '0'],
      ...['--json', '--timeline', timeline],
    ],
    { cwd: tree, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk;
  });
  await once(child, 'exit');
  const result = JSON.parse(out) as Omit<Run, 'lastTenSecondsP99Ms' | 'sustained'>;
  const rows = readFileSync(timeline, 'utf8')
    .trim()
    .split('\n')
    .slice(1)
    .map((line) => line.split(',').map(Number) as [number, number, number]);
  const end = rows.reduce((max, [, committed]) => Math.max(max, committed), 0);
  const last = rows
    .filter(([, committed]) => committed > end - 10_000)
    .map(([, , latency]) => latency)
    .sort((a, b) => a - b);
  const lastTenSecondsP99Ms = Number(quantile(last, 0.99).toFixed(1));
  const sustained =
    result.lost === 0 &&
    result.doubled === 0 &&
    result.unverified === 0 &&
    result.achievedRate >= 0.97 * rate &&
    lastTenSecondsP99Ms < SUSTAINED_P99_MS;
  return { ...result, rate, lastTenSecondsP99Ms, sustained };
}

interface Goals {
  label: string;
  latency: Run;
  steps: Run[];
  /** The highest rate of the steps that was sustained; 0 when none was. */
  sustainedRate: number;
}

async function goals(label: string, tree: string): Promise<Goals> {
  console.error(`${label}: ${LATENCY_RATE} events/s for 30 s`);
  const latency = await run(tree, LATENCY_RATE, 30);
  const steps: Run[] = [];
  for (let rate = Number(flags.from); rate <= Number(flags.max); rate += Number(flags.step)) {
    console.error(`${label}: ${rate} events/s for ${SUSTAIN_S} s`);
    const step = await run(tree, rate, SUSTAIN_S);
    steps.push(step);
    console.error(
      `${label}: ${rate}/s → ${step.sustained ? 'sustained' : 'not sustained'} (last 10 s p99 ${step.lastTenSecondsP99Ms} ms, committed at ${step.achievedRate}/s)`,
    );
    if (!step.sustained) break;
  }
  const sustainedRate = Math.max(0, ...steps.filter((s) => s.sustained).map((s) => s.rate));
  return { label, latency, steps, sustainedRate };
}

/** The code of `rev`, extracted under var/ with this checkout's node_modules. */
function extract(rev: string): string {
  mkdirSync('var', { recursive: true });
  const dir = mkdtempSync(join(resolve('var'), 'bench-before-'));
  execFileSync('sh', ['-c', `git archive "$1" | tar -x -C "$2"`, 'sh', rev, dir]);
  symlinkSync(resolve('node_modules'), join(dir, 'node_modules'));
  return dir;
}

const trees: Array<[string, string]> = [['this checkout', process.cwd()]];
const extracted = flags.before ? extract(flags.before) : undefined;
if (extracted) trees.unshift([`before (${flags.before})`, extracted]);
try {
  const results: Goals[] = [];
  for (const [label, tree] of trees) results.push(await goals(label, tree));
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  } else {
    const rows: Array<[string, ...string[]]> = [
      ['', ...results.map((r) => r.label)],
      [
        `p50 / p99 at ${LATENCY_RATE}/s (goal p99 < ${LATENCY_GOAL_MS} ms)`,
        ...results.map((r) => `${r.latency.p50Ms} / ${r.latency.p99Ms} ms`),
      ],
      [
        `highest rate sustained ${SUSTAIN_S} s (goal ≥ ${SUSTAIN_GOAL}/s)`,
        ...results.map((r) => `${r.sustainedRate}/s`),
      ],
      ...[...new Set(results.flatMap((r) => r.steps.map((s) => s.rate)))].map(
        (rate): [string, ...string[]] => [
          `  at ${rate}/s: p99, last 10 s p99`,
          ...results.map((r) => {
            const step = r.steps.find((s) => s.rate === rate);
            return step ? `${step.p99Ms} ms, ${step.lastTenSecondsP99Ms} ms` : '';
          }),
        ],
      ),
    ];
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length)));
    for (const row of rows) console.log(row.map((cell, i) => cell.padEnd(widths[i]!)).join('  '));
  }
  const now = results.at(-1)!;
  process.exitCode = now.latency.p99Ms < LATENCY_GOAL_MS && now.sustainedRate >= SUSTAIN_GOAL ? 0 : 1;
} finally {
  if (extracted) rmSync(extracted, { recursive: true, force: true });
}
