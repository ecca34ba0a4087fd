// The test build: every .ts file of src/ and test/ transpiled once (esbuild, types stripped, as tsx
// does) into var/test-build/, so that a test process loads plain JavaScript instead of starting
// tsx (about half a second of CPU per process: its loader thread, esbuild, a cache lookup per
// module). A built file keeps its source's mtime; a source whose mtime differs from its built
// file's is transpiled again, by the build before a run (build.mjs) or, should it change during
// one, by the loader on the spot (hooks.mjs): a test never runs stale code.
import { mkdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root, with a trailing separator. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Where the built files go: var/test-build/<path of the source>.js. */
export const OUT_DIR = join(ROOT, 'var', 'test-build');

/** True for a TypeScript source of this repository that the loader serves from the build. */
export function isOwnTypeScript(path) {
  return (
    path.startsWith(ROOT) &&
    path.endsWith('.ts') &&
    !path.endsWith('.d.ts') &&
    !path.includes(`${sep}node_modules${sep}`)
  );
}

export function builtPath(sourcePath) {
  return join(OUT_DIR, `${relative(ROOT, sourcePath).slice(0, -'.ts'.length)}.js`);
}

const { compilerOptions } = JSON.parse(readFileSync(join(ROOT, 'tsconfig.json'), 'utf8'));

/**
 * esbuild's options for one file: tsconfig.json's compiler options (verbatimModuleSyntax, and
 * class fields as its ES2022 target defines them), ES modules for Node 20, and an inline source
 * map so that a failure's stack names the .ts file and line (the module keeps its .ts URL).
 */
function transformOptions(sourcePath) {
  return {
    loader: 'ts',
    format: 'esm',
    target: 'node20',
    sourcemap: 'inline',
    sourcesContent: false,
    sourcefile: basename(sourcePath),
    tsconfigRaw: { compilerOptions },
  };
}

/** True when `sourcePath` has a built file written from its current version. */
export function isBuilt(sourcePath) {
  const built = statSync(builtPath(sourcePath), { throwIfNoEntry: false });
  // Within a millisecond: utimes takes seconds as a double, which rounds the stamp a little.
  return built !== undefined && Math.abs(built.mtimeMs - statSync(sourcePath).mtimeMs) < 1;
}

/** Transpiles one source and writes its built file, stamped with the source's mtime. */
export async function buildFile(esbuild, sourcePath) {
  const { mtime } = statSync(sourcePath);
  const { code } = await esbuild.transform(readFileSync(sourcePath, 'utf8'), transformOptions(sourcePath));
  const out = builtPath(sourcePath);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, code);
  utimesSync(out, mtime, mtime);
}

/** Transpiles one source in memory (the loader's fallback for a file changed since the build). */
export async function transpile(esbuild, sourcePath) {
  const { code } = await esbuild.transform(readFileSync(sourcePath, 'utf8'), transformOptions(sourcePath));
  return code;
}
