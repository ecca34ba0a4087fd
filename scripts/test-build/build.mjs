// Brings the test build up to date: transpiles each .ts file of src/, test/ and bench/ (whose loader a test checks) that is new or
// changed since it was last built (transpile.mjs). A second or less for all of them; next to
// nothing when nothing changed.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { buildFile, isBuilt, ROOT } from './transpile.mjs';

/** Builds what is missing or stale; returns how many files were transpiled. */
export async function updateTestBuild() {
  const stale = ['src', 'test', 'bench']
    .flatMap((dir) =>
      readdirSync(join(ROOT, dir), { recursive: true }).map((f) => join(ROOT, dir, String(f))),
    )
    .filter((path) => path.endsWith('.ts') && !path.endsWith('.d.ts') && !isBuilt(path));
  if (stale.length > 0) {
    const esbuild = await import('esbuild');
    await Promise.all(stale.map((path) => buildFile(esbuild, path)));
  }
  return stale.length;
}
