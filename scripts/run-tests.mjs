// Runs every test/**/*.test.ts file with Node's built-in test runner (through tsx).
// Node 20's --test takes no globs, so the file list is built here.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';

const filter = process.argv[2];
const files = readdirSync('test', { recursive: true })
  .map(String)
  .filter((f) => f.endsWith('.test.ts') && (!filter || f.includes(filter)))
  .sort()
  .map((f) => `test/${f}`);
if (files.length === 0) {
  console.error(`no test files match ${filter ?? 'test/**/*.test.ts'}`);
  process.exit(1);
}
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-reporter=spec', '--test-concurrency=2', ...files],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
