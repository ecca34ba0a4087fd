import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';

const root = resolve(import.meta.dirname, '..', '..');
const DOMAIN = join(root, 'src', 'domain');

/**
 * The specifiers a module loads when it runs: `import … from` and `export … from` that are not
 * `import type`/`export type` (erased by the compiler), `import '…'`, and `import()`.
 */
function runtimeImports(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  const specifiers: string[] = [];
  for (const match of source.matchAll(/^(import|export)\s+(type\s+)?[^;]*?from\s+'([^']+)';/gms)) {
    if (!match[2]) specifiers.push(match[3]!);
  }
  for (const match of source.matchAll(/^import\s+'([^']+)';/gm)) specifiers.push(match[1]!);
  for (const match of source.matchAll(/import\(\s*'([^']+)'\s*\)/g)) specifiers.push(match[1]!);
  return specifiers;
}

/** Every module `entry` loads, followed through relative imports; and the npm packages among them. */
function loadedBy(entry: string): { modules: Set<string>; packages: Set<string> } {
  const modules = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (modules.has(file)) return;
    modules.add(file);
    for (const specifier of runtimeImports(file)) {
      if (specifier.startsWith('.')) visit(resolve(dirname(file), specifier.replace(/\.js$/, '.ts')));
      else if (!specifier.startsWith('node:')) packages.add(specifier);
    }
  };
  visit(entry);
  return { modules, packages };
}

test('the domain (state machine, rules, public order) loads no package and no SQL, HTTP, Redis or queue module: its rules read without an adapter', () => {
  const adapters =
    /^src\/(store\/(sql|sqlite|postgres)\/|queue\/|api\/|receiver\/|worker\/|notify\/|reconciler\/|cli\/|upstream\/(client|create-upstream))/;
  const files = readdirSync(DOMAIN).filter((name) => name.endsWith('.ts'));
  assert.ok(files.includes('state-machine.ts') && files.includes('apply-plan.ts'));
  for (const name of files) {
    const { modules, packages } = loadedBy(join(DOMAIN, name));
    assert.deepEqual([...packages], [], `src/domain/${name} loads packages`);
    const reached = [...modules].map((file) => relative(root, file)).filter((file) => adapters.test(file));
    assert.deepEqual(reached, [], `src/domain/${name} loads adapter modules`);
  }
});
