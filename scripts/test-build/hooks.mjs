// Module hooks (registered by register.mjs): this repository's .ts files load from the test build
// under their own URLs, so import.meta.url, relative paths and stack traces stay those of the
// sources. A specifier ending in .js that names a .ts source (TypeScript's NodeNext form,
// `../src/x.js`) resolves to that source.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { builtPath, isBuilt, isOwnTypeScript, transpile } from './transpile.mjs';

export async function resolve(specifier, context, nextResolve) {
  if (specifier.endsWith('.js') && /^\.\.?\//.test(specifier) && context.parentURL?.startsWith('file:')) {
    const source = fileURLToPath(new URL(`${specifier.slice(0, -'.js'.length)}.ts`, context.parentURL));
    if (isOwnTypeScript(source) && existsSync(source)) {
      return { url: pathToFileURL(source).href, format: 'module', shortCircuit: true };
    }
  }
  return nextResolve(specifier, context);
}

export async function load(url, context, nextLoad) {
  const path = url.startsWith('file:') ? fileURLToPath(url) : '';
  if (!isOwnTypeScript(path)) return nextLoad(url, context);
  // Changed since the build (edited during a run): transpiled now, as tsx would.
  const source = isBuilt(path)
    ? readFileSync(builtPath(path), 'utf8')
    : await transpile(await import('esbuild'), path);
  return { format: 'module', source, shortCircuit: true };
}
