/**
 * Writes docs/openapi.json: the shop API's OpenAPI 3 document, generated from its route schemas
 * (the same one `GET /openapi.json` serves). `npm run docs:openapi`; a test checks it is current.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApiApp } from '../src/api/app.js';
import { apiSettings, loadConfig, reconcilerSettings } from '../src/config/config.js';
import { openDatabase } from '../src/store/database.js';
import { openOrderStore } from '../src/store/order-store.js';

const dir = mkdtempSync(join(tmpdir(), 'h2h-openapi-'));
const db = openDatabase({ path: join(dir, 'h2h-sync.db') });
try {
  const config = loadConfig({});
  const { submissionBacklog, retryAfterS } = apiSettings(config);
  const app = await buildApiApp({
    store: openOrderStore(db, reconcilerSettings(config)),
    submissionBacklog,
    retryAfterS,
  });
  await app.ready();
  writeFileSync('docs/openapi.json', `${JSON.stringify(app.swagger(), null, 2)}\n`);
  await app.close();
} finally {
  db.close();
  rmSync(dir, { recursive: true, force: true });
}
