// `h2h-sync store migrate --to postgres://…` (docs/store-backends.md, "Moving a SQLite store to
// PostgreSQL"): a real SQLite file copied by the CLI into a private PostgreSQL, then read back
// through the PostgreSQL store.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { wantedTypes } from '../../src/notify/event-filter.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { learnPace } from '../../src/reconciler/learn-pace.js';
import { COPY_ORDER, migrateToPostgres } from '../../src/store/migrate-to-postgres.js';
import { type OpenedStore, openStore } from '../../src/store/open-store.js';
import { redactUrl } from '../../src/store/store-url.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import { runCli } from '../helpers/cli.js';
import {
  type ManualClock,
  openTestStore,
  scheduleSettings,
  snapshot,
  tempDbPath,
  tempStore,
} from '../helpers/store.js';
import { storeBackends } from '../helpers/store-backends.js';

const [backend] = storeBackends({ H2H_TEST_STORE: 'postgres' });
const pg = backend!;

/** Enough orders that the orders table takes several INSERT batches. */
const BULK_ORDERS = 320;

/**
 * A store with something in every table, through the store's public API: orders in each
 * submission state and several statuses (with their webhook, poll and manual events, feed events
 * and the first-poll plans learned from them), tokens (one revoked), an endpoint with notifications waiting and deliveries, a
 * catalog sync with a balance, and an open circuit. Returns the refs and the live token.
 */
async function fillStore(store: OpenedStore, clock: ManualClock) {
  await store.catalog.applySync(catalogSnapshot({ balance: 1_000_000, readAt: clock.now() }));
  const refs: string[] = [];
  const local = async (ref: string, queued = false) => {
    refs.push(ref);
    await store.writer.createLocalOrder({
      partnerRef: ref,
      productCode: 'ML86',
      data: { user_id: '1' },
      queued,
    });
  };
  await local('QUEUED', true);
  await local('REJECTED');
  await store.writer.markRejected('REJECTED', 'INVALID_TARGET', 'bad user id');
  await local('UNKNOWN');
  await store.writer.markSubmissionUnknown('UNKNOWN');
  await local('BLOCKED');
  await store.writer.markBlocked('BLOCKED', 'IP_NOT_WHITELISTED', 'add the IP');
  await local('DONE');
  clock.advance(1_000);
  await store.writer.applyOrderSnapshot(snapshot('DONE', 'PENDING'), { source: 'webhook', eventId: 'w1' });
  clock.advance(30_000);
  await store.writer.applyOrderSnapshot(snapshot('DONE', 'SUCCESS', { serial_number: 'SN-1' }), {
    source: 'webhook',
    eventId: 'w2',
  });
  await local('FAILED');
  await store.writer.applyOrderSnapshot(snapshot('FAILED', 'FAILED'), { source: 'poll' });
  for (let i = 0; i < BULK_ORDERS; i++) {
    const ref = `BULK-${i}`;
    refs.push(ref);
    clock.advance(10);
    await store.writer.applyOrderSnapshot(snapshot(ref, i % 3 === 0 ? 'SUCCESS' : 'PENDING'), {
      source: 'webhook',
      eventId: `b${i}`,
    });
  }
  const { token } = await store.tokens.create('web shop', ['orders:read', 'orders:write']);
  const revoked = await store.tokens.create('old shop', ['orders:read']);
  await store.tokens.revoke(revoked.info.id);
  const endpoint = await store.endpoints.add({
    url: 'http://127.0.0.1:9/hook',
    events: ['order.*'],
    secret: generateEndpointSecret(),
  });
  // A new endpoint starts at the feed's end; from the start, the first three events wait for it.
  await store.db.run('UPDATE notify_endpoints SET cursor = 0 WHERE id = @id', { id: endpoint.id });
  await store.outbox.fill({ id: endpoint.id, cursor: 0 }, wantedTypes(['*']), { page: 3 });
  for (const [seq, outcome] of [
    [1, 'delivered'],
    [2, 'retrying'],
    [2, 'gave_up'],
  ] as const) {
    await store.deliveries.record({
      endpointId: endpoint.id,
      seq,
      type: 'order.updated',
      partnerRef: 'DONE',
      attempt: 1,
      requestedAt: clock.now(),
      status: outcome === 'delivered' ? 200 : 500,
      durationMs: 12,
      error: null,
      outcome,
    });
  }
  await store.circuit.open('upstream_failing', { code: 'UPSTREAM_5XX', message: '503 for a minute' });
  await learnPace(store.pollPlans, 'default', scheduleSettings({ paceMinSamples: 1 }));
  return { refs, token };
}

/** Everything a store answers about its contents, read through its public API. */
async function answers(store: OpenedStore, refs: readonly string[]) {
  return {
    orders: await Promise.all(refs.map((ref) => store.queries.getOrder(ref))),
    events: await Promise.all(refs.map((ref) => store.queries.listEvents(ref))),
    feed: await store.feed.after(0, 1000),
    lastSeq: await store.feed.lastSeq(),
    counts: await store.queries.countByStatus(),
    tokens: await store.tokens.list(),
    endpoints: await store.endpoints.list(),
    deliveries: await store.deliveries.history(),
    failedDeliveries: await store.deliveries.failed(),
    outbox: await Promise.all(
      (await store.endpoints.list()).map((e) => store.outbox.backlog(e, wantedTypes(e.events))),
    ),
    categories: await store.catalog.categories(),
    products: await store.catalog.products(),
    syncedAt: await store.catalog.syncedAt(),
    balance: await store.balance.view(),
    circuit: await store.circuit.state(),
    plans: await store.pollPlans.ofUpstream('default'),
  };
}

describe('h2h-sync store migrate', () => {
  test('copies every table of a SQLite store into PostgreSQL: the same answers, the next ids and seqs, a second run refused, the password never printed', async (t) => {
    const { store: source, path, clock } = await tempStore(t);
    const { refs, token } = await fillStore(source, clock);
    for (const table of COPY_ORDER) {
      const { n } = source.sqlite!.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number };
      assert.ok(n > 0, `the source has rows in ${table}`);
    }
    const url = await pg.emptyUrl(t);
    const password = new URL(url).password;
    assert.ok(
      password.length > 0,
      'the test server has a password, so its absence from output means something',
    );

    const run = await runCli(['store', 'migrate', '--to', url, '--json'], { H2H_DB_PATH: path });
    assert.equal(run.code, 0, run.stderr);
    const summary = JSON.parse(run.stdout);
    assert.equal(summary.to, redactUrl(url));
    assert.equal(summary.from, path);
    assert.deepEqual(
      summary.tables.map((t: { table: string }) => t.table),
      [...COPY_ORDER],
    );
    assert.equal(summary.tables.find((t: { table: string }) => t.table === 'orders').rows, refs.length);
    assert.equal(summary.last_feed_seq, await source.feed.lastSeq());
    assert.equal(summary.rounded, 0);
    for (const table of COPY_ORDER) assert.match(run.stderr, new RegExp(`^  ${table}: [0-9,]+ rows`, 'm'));

    const target = await pg.open(t, url, { now: clock.now });
    assert.equal(target.backend, 'postgres');
    const reader = await openTestStore(path, undefined, { now: clock.now });
    t.after(() => reader.close());
    assert.deepEqual(await answers(target, refs), await answers(reader, refs));
    assert.deepEqual(
      (await target.deliveries.failed()).map((d) => [d.seq, d.outcome]),
      [[2, 'gave_up']],
      'the given-up delivery is failed on the target too',
    );
    const authenticated = await target.tokens.authenticate(token);
    assert.ok(authenticated.ok, 'a token made before the copy authenticates against the copy');

    // The identities were set: the next rows continue the source's ids and seqs.
    const lastOrderId = Math.max(...(await source.queries.listOrders({ limit: 1000 })).map((o) => o.id));
    const lastSeq = await source.feed.lastSeq();
    const { order } = await target.writer.createLocalOrder({
      partnerRef: 'AFTER',
      productCode: 'ML86',
      data: {},
    });
    assert.equal(order.id, lastOrderId + 1);
    await target.writer.applyOrderSnapshot(snapshot('AFTER', 'PENDING'), {
      source: 'webhook',
      eventId: 'after',
    });
    const [next] = await target.feed.after(lastSeq);
    assert.equal(next?.seq, lastSeq + 1, 'the next feed event takes the next seq');
    const endpoint = await target.endpoints.add({
      url: 'http://127.0.0.1:9/b',
      events: ['order.*'],
      secret: generateEndpointSecret(),
    });
    assert.equal(endpoint.id, (await source.endpoints.list()).length + 1);

    // A second run finds rows and refuses, writing nothing.
    const again = await runCli(['store', 'migrate', '--to', url], { H2H_DB_PATH: path });
    assert.equal(again.code, 2, again.stderr);
    assert.match(
      again.stderr,
      /already holds a store \(rows in orders, .*\).*never merges: give --to a new database/,
    );
    const count = await target.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM orders');
    assert.equal(Number(count?.n), refs.length + 1, 'the copy and the order written after it, nothing more');
    const againJson = await runCli(['store', 'migrate', '--to', url, '--json'], { H2H_DB_PATH: path });
    assert.equal(JSON.parse(againJson.stdout).error.code, 'TARGET_NOT_EMPTY');

    for (const output of [run, again, againJson]) {
      assert.ok(!`${output.stdout}${output.stderr}`.includes(password), 'the password is never printed');
    }
  });

  test('a write to the SQLite file during the copy rolls the whole copy back, and a run after it copies', async (t) => {
    const { store: source, path, clock } = await tempStore(t);
    await source.writer.createLocalOrder({ partnerRef: 'A', productCode: 'ML86', data: {} });
    const url = await pg.emptyUrl(t);
    // Opened as `store migrate` opens it: migrated, and empty (no reconciler's plans).
    const target = await openStore(url, { role: 'test', now: clock.now });
    t.after(() => target.close());
    // Another process (an app left running) writes while the orders are copied.
    const app = await openTestStore(path);
    t.after(() => app.close());
    await assert.rejects(
      migrateToPostgres({
        source,
        sourcePath: path,
        target,
        targetLabel: redactUrl(url),
        onTable: async ({ table }) => {
          if (table === 'orders')
            await app.writer.createLocalOrder({ partnerRef: 'B', productCode: 'ML86', data: {} });
        },
      }),
      (error: Error & { code?: string }) =>
        error.code === 'SOURCE_CHANGED' && /stop the apps/.test(error.message),
    );
    assert.deepEqual(await target.queries.listOrders(), [], 'nothing was written to the target');

    const summary = await migrateToPostgres({
      source,
      sourcePath: path,
      target,
      targetLabel: redactUrl(url),
    });
    assert.equal(summary.tables.find((c) => c.table === 'orders')?.rows, 2);
    assert.deepEqual((await target.queries.listOrders()).map((o) => o.partnerRef).sort(), ['A', 'B']);
  });

  test('refuses a target that is not PostgreSQL and a source that does not exist (exit 2, the fix named)', async (t) => {
    const path = tempDbPath(t);
    const notPg = await runCli(['store', 'migrate', '--to', `sqlite://${path}.copy`, '--json'], {
      H2H_DB_PATH: path,
    });
    assert.equal(notPg.code, 2);
    assert.equal(JSON.parse(notPg.stdout).error.code, 'NOT_POSTGRES_TARGET');
    const url = await pg.emptyUrl(t);
    const missing = await runCli(['store', 'migrate', '--to', url], { H2H_DB_PATH: path });
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /no store at .*: set H2H_DB_URL/);
  });
});
