// The volume bench's bulk loader (bench/volume-loader.ts) must write exactly what the write path
// writes: a store of orders built both ways, every row of every table compared.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { loadVolumeStore } from '../../bench/volume-loader.js';
import { addVolumeEndpoint, settableClock, volumeBase, writeVolumeOrder } from '../../bench/volume-orders.js';
import { openStore } from '../../src/store/open-store.js';
import type { SqlExecutor } from '../../src/store/sql/executor.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const KINDS = 10;
const ORDERS = 25;

/** Every row of every table of the store at `url`, by table, in a fixed order. */
async function everyRow(url: string): Promise<Record<string, unknown[]>> {
  const store = await openStore(url, { role: 'test' });
  try {
    const db: SqlExecutor = store.db;
    const tables = (
      db.dialect.name === 'sqlite'
        ? await db.all<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        : await db.all<{ name: string }>(
            'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name',
          )
    ).map((t) => t.name);
    // The schema too: every index and trigger, and whether the trigger fires (the loader sets
    // both aside for the copy and puts them back).
    const rows: Record<string, unknown[]> = {
      '(schema)':
        db.dialect.name === 'sqlite'
          ? await db.all('SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name')
          : await db.all(
              `SELECT indexname AS name, indexdef AS sql FROM pg_indexes WHERE schemaname = current_schema()
               UNION ALL SELECT tgname, pg_get_triggerdef(oid) || ' (tgenabled ' || tgenabled::text || ')'
                 FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1`,
            ),
    };
    for (const table of tables) {
      const all = (await db.all<Record<string, unknown>>(`SELECT * FROM ${table}`)).map((row) =>
        JSON.stringify(row),
      );
      rows[table] = all.sort().map((row) => JSON.parse(row));
    }
    return rows;
  } finally {
    await store.close();
  }
}

describeEachBackend('the volume bench loader', (backend) => {
  it('writes every row of every table as the write path does, pruned feed included', async (t) => {
    const pruneBefore = volumeBase(12);
    const loaded = await backend.emptyUrl(t);
    await loadVolumeStore(loaded, ORDERS, { kinds: KINDS, pruneBefore, chunk: 4 });

    const written = await backend.emptyUrl(t);
    const clock = settableClock(volumeBase(0) - 1000);
    const store = await openStore(written, { now: clock.now, role: 'test' });
    try {
      const endpointId = await addVolumeEndpoint(store);
      for (let i = 0; i < ORDERS; i++) await writeVolumeOrder(store, clock, endpointId, i, KINDS);
      clock.set(pruneBefore);
      assert.ok((await store.feed.prune(0)) > 0, 'the pruning deleted feed events');
    } finally {
      await store.close();
    }

    const expected = await everyRow(written);
    const actual = await everyRow(loaded);
    assert.ok(expected.orders!.length === ORDERS && expected.order_events!.length > ORDERS);
    assert.deepEqual(Object.keys(actual), Object.keys(expected));
    assert.ok(expected['(schema)']!.length > 10);
    for (const table of Object.keys(expected))
      assert.deepEqual(actual[table], expected[table], `table ${table}`);
  });
});
