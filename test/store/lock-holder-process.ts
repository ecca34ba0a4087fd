// A child process for write-lock.test.ts: takes the write lock of the store's file, writes an
// order inside that transaction, and commits when told to (message "release") or, when given a
// hold time, after it.
import { openDatabase } from '../../src/store/database.js';

const [dbPath, holdMs] = process.argv.slice(2) as [string, string | undefined];
const db = openDatabase({ path: dbPath });
db.exec('BEGIN IMMEDIATE');
db.prepare(
  `INSERT INTO orders (partner_ref, local_created_at, updated_at, submission_state)
   VALUES ('HELD', 1, 1, 'pending')`,
).run();
const release = () => {
  db.exec('COMMIT');
  db.close();
  process.send!('released', () => process.disconnect());
};
process.send!('locked');
process.once('message', release);
if (holdMs !== undefined) setTimeout(release, Number(holdMs));
