/**
 * Writes docs/openapi.json: the shop API's OpenAPI 3.1 document, generated from its route schemas
 * (the same one `GET /openapi.json` serves). `npm run docs:openapi`; a test checks it is current.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApiApp } from '../src/api/app.js';
import { apiSettings, loadConfig } from '../src/config/config.js';
import { openStore, sqliteUrl } from '../src/store/open-store.js';

const dir = mkdtempSync(join(tmpdir(), 'h2h-openapi-'));
const config = loadConfig({});
const store = await openStore(sqliteUrl(join(dir, 'h2h-sync.db')));
try {
  const { submissionBacklog, retryAfterS } = apiSettings(config);
  const app = await buildApiApp({
    store,
    submissionBacklog,
    retryAfterS,
  });
  await app.ready();
  writeFileSync('docs/openapi.json', `${JSON.stringify(app.swagger(), null, 2)}\n`);
  await app.close();
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
