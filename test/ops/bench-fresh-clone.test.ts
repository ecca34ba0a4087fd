import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';

const root = resolve(import.meta.dirname, '..', '..');

test('bench:worker runs in a checkout that has no var/ directory yet (a fresh clone)', async (t) => {
  const checkout = mkdtempSync(join(tmpdir(), 'h2h-fresh-'));
  t.after(() => rmSync(checkout, { recursive: true, force: true }));
  for (const entry of ['src', 'bench', 'fixtures', 'node_modules', 'package.json', 'tsconfig.json']) {
    symlinkSync(join(root, entry), join(checkout, entry));
  }
  assert.equal(existsSync(join(checkout, 'var')), false);

  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'bench/worker.ts', '--events', '200', '--min-rate', '1'],
    { cwd: checkout, env: { PATH: process.env.PATH ?? '' } },
  );

  assert.match(stdout, /event worker: +[\d,]+ events\/s applied/);
});
