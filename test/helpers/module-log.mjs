// Preloaded with `node --import` (after tsx) by `runCliLoggingModules` (cli.ts): appends the file of
// every module the process loads to the file named by H2H_TEST_MODULE_LOG, one a line. ES modules
// are logged as they are resolved (module-log-hooks.mjs, on the loader's thread); CommonJS ones,
// which a `require` loads without those hooks on Node 20, from `require.cache` when the process exits.
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';

const logPath = process.env.H2H_TEST_MODULE_LOG;
if (!logPath) throw new Error('module-log.mjs needs H2H_TEST_MODULE_LOG: the file to append to');

register('./module-log-hooks.mjs', import.meta.url, { data: { logPath } });

const { cache } = createRequire(import.meta.url);
process.on('exit', () => {
  appendFileSync(
    logPath,
    Object.keys(cache)
      .map((file) => `${file}\n`)
      .join(''),
  );
});
