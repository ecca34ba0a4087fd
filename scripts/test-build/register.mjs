// `node --import ./scripts/test-build/register.mjs file.ts`: runs this repository's TypeScript from
// the test build (transpile.mjs), with stack traces mapped to the .ts lines.
import { register } from 'node:module';

process.setSourceMapsEnabled(true);
register('./hooks.mjs', import.meta.url);
