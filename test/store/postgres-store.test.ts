// The PostgreSQL backend's own mechanisms (docs/store-backends.md): what the shared behaviour
// tests cannot show because SQLite has one writer at a time anyway — opening errors, the
// migration lock, lock time-outs, SKIP LOCKED claims and a feed without gaps under racing writers.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import postgres from 'postgres';
import { freePort } from '../../src/dev/redis-server.js';
import { LATEST_SCHEMA_VERSION } from '../../src/store/migrations.js';
import { openStore } from '../../src/store/open-store.js';
import { StoreError } from '../../src/store/store-error.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import { snapshot } from '../helpers/store.js';
import { storeBackends } from '../helpers/store-backends.js';

const [backend] = storeBackends({ H2H_TEST_STORE: 'postgres' });
const pg = backend!;

describe('the PostgreSQL store', () => {
  test('a server that cannot be reached is named without its password, with the setting to fix', async () => {
    const port = await freePort();
    await assert.rejects(
      openStore(`postgres://h2h:s3cret@127.0.0.1:${port}/h2h`, { role: 'test' }),
      (error: unknown) =>
        error instanceof StoreError &&
        error.code === 'DATABASE_OPEN_FAILED' &&
        error.message.includes(`postgres://h2h:***@127.0.0.1:${port}/h2h`) &&
        error.message.includes('H2H_DB_URL') &&
        !error.message.includes('s3cret'),
    );
    // A password with a slash the driver cannot parse: its error (which holds the whole URL) is
    // not passed on.
    await assert.rejects(
      openStore(`postgres://h2h:pa/s3cret@127.0.0.1:${port}/h2h`, { role: 'test' }),
      (error: unknown) =>
        error instanceof StoreError &&
        error.code === 'DATABASE_OPEN_FAILED' &&
        /percent-encode/.test(error.message) &&
        !JSON.stringify({ message: error.message, cause: String(error.cause) }).includes('s3cret'),
    );
  });

  test('a command that only reads refuses a database without a store instead of creating one', async (t) => {
    const url = await pg.emptyUrl(t);
    await assert.rejects(
      openStore(url, { role: 'test', mustExist: true }),
      (error: unknown) =>
        error instanceof StoreError && error.code === 'STORE_NOT_FOUND' && /H2H_DB_URL/.test(error.message),
    );
    // Nothing was created meanwhile: a writer then creates and migrates it.
    const store = await pg.open(t, url);
    const row = await store.db.get<{ version: number }>('SELECT version FROM schema_version');
    assert.equal(row?.version, LATEST_SCHEMA_VERSION);
  });

  test('five processes opening a new database at once migrate it once, each step once', async (t) => {
    const url = await pg.emptyUrl(t);
    const stores = await Promise.all([1, 2, 3, 4, 5].map(() => pg.open(t, url)));
    const versions = await stores[0]!.db.all<{ version: number }>('SELECT version FROM schema_version');
    assert.deepEqual(versions, [{ version: LATEST_SCHEMA_VERSION }], 'one row, at the latest version');
    await stores[1]!.writer.createLocalOrder({ partnerRef: 'P1', productCode: 'ML86', data: {} });
    assert.equal((await stores[4]!.queries.getOrder('P1'))?.partnerRef, 'P1');
  });

  test('a write that cannot take the feed lock within its wait fails STORE_BUSY and writes nothing', async (t) => {
    const { store, url } = await pg.tempStore(t, { lockTimeoutMs: 200 });
    const held = await pg.holdWriteLock(t, url);
    await assert.rejects(
      store.writer.applyOrderSnapshot(snapshot('B1', 'PENDING'), { source: 'webhook', eventId: 'e1' }),
      (error: unknown) => error instanceof StoreError && error.code === 'STORE_BUSY',
    );
    await held.release();
    assert.equal(await store.queries.getOrder('B1'), undefined);
    // The same event, tried again once the lock is free, applies.
    const applied = await store.writer.applyOrderSnapshot(snapshot('B1', 'PENDING'), {
      source: 'webhook',
      eventId: 'e1',
    });
    assert.equal(applied.changed, true);
  });

  test('two hosts claiming due orders at once never claim the same order, and together claim every one', async (t) => {
    // Orders made on the manual clock (2026-11-01) are long due on the real one.
    const { store: a, url } = await pg.tempStore(t);
    for (let i = 0; i < 40; i++)
      await a.writer.createLocalOrder({ partnerRef: `D${i}`, productCode: 'ML86', data: {} });
    const b = await pg.open(t, url);
    const other = await pg.open(t, url);
    // Twenty claims of two orders each, from two stores at the same moment.
    const claims = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? b : other).claims.claimDueForPoll(2)),
    );
    const refs = claims.flat().map((o) => o.partnerRef);
    assert.equal(new Set(refs).size, refs.length, `an order was claimed twice: ${refs.join(' ')}`);
    assert.equal(refs.length, 40, 'every due order was claimed by one of them');
  });

  test('two hosts recording the same delivery attempt at once leave one row of it', async (t) => {
    const { store: a, url } = await pg.tempStore(t, { now: Date.now });
    const b = await pg.open(t, url);
    await a.writer.applyOrderSnapshot(snapshot('N1', 'PENDING'), { source: 'create' });
    const endpoint = await a.endpoints.add({
      url: 'http://127.0.0.1:9/hook',
      events: ['order.*'],
      secret: 'whsec_x',
    });
    const attempts = Array.from({ length: 20 }, (_, i) => ({
      endpointId: endpoint.id,
      seq: 1,
      type: 'order.submitted',
      partnerRef: 'N1',
      attempt: i + 1,
      requestedAt: 1_000 + i,
      status: 200,
      durationMs: 5,
      error: null,
      outcome: 'delivered' as const,
    }));
    // Two hosts recording each attempt at once.
    await Promise.all([
      ...attempts.map((x) => a.deliveries.record(x)),
      ...attempts.map((x) => b.deliveries.record(x)),
    ]);
    const history = await a.deliveries.history({ endpointId: endpoint.id, limit: 100 });
    assert.equal(history.length, 20, 'each attempt recorded once');
  });

  test('a reader following the feed while two hosts write misses no event', async (t) => {
    const { store: a, url } = await pg.tempStore(t, { now: Date.now });
    const b = await pg.open(t, url);
    const reader = await pg.open(t, url);
    const seen: number[] = [];
    let cursor = 0;
    let writing = true;
    const follow = (async () => {
      // Reads as the shop's GET /v1/events does: from its cursor, moving it to the last event it saw.
      while (writing || (await reader.feed.after(cursor, 100)).length > 0) {
        for (const event of await reader.feed.after(cursor, 100)) {
          seen.push(event.seq);
          cursor = event.seq;
        }
      }
    })();
    await Promise.all(
      [a, b].map(async (store, host) => {
        for (let i = 0; i < 60; i++) {
          await store.writer.applyOrderSnapshot(snapshot(`F${host}-${i}`, 'PENDING'), {
            source: 'webhook',
            eventId: `f${host}-${i}`,
          });
        }
      }),
    );
    writing = false;
    await follow;
    const all = (await reader.feed.after(0, 1000)).map((e) => e.seq);
    assert.equal(all.length, 120);
    assert.deepEqual(seen, all, 'the follower saw every event, in order, none skipped');
  });

  test("a database whose locale sorts text as words lists the catalog and tokens in SQLite's byte order", async (t) => {
    // Production databases are created in the host's locale (en_US.UTF-8 and the like), whose
    // collation ignores case and punctuation at first; the test server's own is C. ICU's en-US
    // stands for them here.
    const url = new URL(await pg.emptyUrl(t));
    const admin = postgres(url.toString(), { max: 1, onnotice: () => {} });
    t.after(() => admin.end({ timeout: 1 }));
    const name = `${url.pathname.slice(1)}_icu`;
    await admin.unsafe(
      `CREATE DATABASE ${name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'`,
    );
    url.pathname = `/${name}`;
    const store = await pg.open(t, url.toString(), { now: () => 1_000 });
    const base = catalogSnapshot({ readAt: 1_000, balance: 0 });
    const codes = ['ml-7', 'ML6', 'Ml5', 'ML60'];
    await store.catalog.applySync({
      ...base,
      categories: ['b', 'B', 'a'].map((code) => ({ ...base.categories[0]!, code })),
      products: codes.map((code, i) => ({ ...base.products[0]!, id: `id-${i}`, code, category_code: 'B' })),
    });
    const byte = (list: string[]) => [...list].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

    assert.deepEqual(
      (await store.catalog.categories()).map((c) => c.code),
      ['B', 'a', 'b'],
    );
    assert.deepEqual(
      (await store.catalog.products()).map((p) => p.code),
      byte(codes),
    );
    assert.deepEqual(
      (await store.catalog.products('B')).map((p) => p.code),
      byte(codes),
    );
    // Tokens made in the same millisecond are listed by id (random letters of both cases).
    for (let i = 0; i < 8; i++) await store.tokens.create(`t${i}`, ['orders:read']);
    const ids = (await store.tokens.list()).map((token) => token.id);
    assert.deepEqual(ids, byte(ids));
  });
});
