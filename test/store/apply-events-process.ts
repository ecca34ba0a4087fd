// A child process for concurrent-processes.test.ts: opens the store (racing its sibling through
// the migrations), waits for "go", applies every event it was given, and reports the outcome.
import { readFileSync } from 'node:fs';
import { openDatabase } from '../../src/store/database.js';
import { openOrderStore } from '../../src/store/order-store.js';
import type { Order } from '../../src/upstream/model.js';
import { scheduleSettings } from '../helpers/store.js';

export interface ProcessEvent {
  eventId: string;
  snapshot: Order;
}

export interface ProcessReport {
  applied: number;
  duplicates: number;
  errors: string[];
}

const [dbPath, eventsPath] = process.argv.slice(2) as [string, string];
const events = JSON.parse(readFileSync(eventsPath, 'utf8')) as ProcessEvent[];
const db = openDatabase({ path: dbPath });
const store = openOrderStore(db, scheduleSettings());
process.send!('ready');
process.once('message', () => {
  const report: ProcessReport = { applied: 0, duplicates: 0, errors: [] };
  for (const { eventId, snapshot } of events) {
    try {
      const result = store.writer.applyOrderSnapshot(snapshot, { source: 'webhook', eventId });
      if (result.duplicate) report.duplicates++;
      else report.applied++;
    } catch (error) {
      report.errors.push(`${(error as { code?: string }).code ?? ''} ${(error as Error).message}`);
    }
  }
  db.close();
  process.send!(report, () => process.disconnect());
});
