import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';

const root = resolve(import.meta.dirname, '..', '..');

type Context = { after(fn: () => void): void };

/**
 * Runs `bench/<script>` with `args` in a new directory laid out like a fresh clone (the sources
 * linked, no var/ yet) and an environment of PATH only; returns its stdout.
 */
async function runBenchInFreshClone(t: Context, script: string, args: string[]): Promise<string> {
  const checkout = mkdtempSync(join(tmpdir(), 'h2h-fresh-'));
  t.after(() => rmSync(checkout, { recursive: true, force: true }));
  for (const entry of ['src', 'bench', 'fixtures', 'node_modules', 'package.json', 'tsconfig.json']) {
    symlinkSync(join(root, entry), join(checkout, entry));
  }
  assert.equal(existsSync(join(checkout, 'var')), false);
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', `bench/${script}`, ...args],
    {
      cwd: checkout,
      env: { PATH: process.env.PATH ?? '' },
    },
  );
  return stdout;
}

test('bench:worker runs in a checkout that has no var/ directory yet (a fresh clone)', async (t) => {
  const stdout = await runBenchInFreshClone(t, 'worker.ts', [
    '--events',
    '200',
    '--min-rate',
    '0',
    '--min-ratio',
    '0',
  ]);

  assert.match(stdout, /event worker: +[\d,]+ events\/s applied/);
});

test('bench:notify runs in a fresh clone: a short run delivers every committed event once', async (t) => {
  // No latency goal here (tests set none): the bench itself fails on a lost or doubled event.
  const stdout = await runBenchInFreshClone(t, 'notify.ts', [
    '--duration',
    '1',
    '--warmup',
    '0',
    '--rate',
    '100',
    '--max-p99',
    '0',
    '--json',
  ]);

  const result = JSON.parse(stdout) as { committed: number; received: number; lost: number; doubled: number };
  assert.equal(result.committed, 100);
  assert.equal(result.received, 100);
  assert.deepEqual([result.lost, result.doubled], [0, 0]);
});
