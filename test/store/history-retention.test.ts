// The history retention (docs/store.md, "History retention"): the events and notification records
// of final orders last changed before H2H_HISTORY_RETENTION_D go, in bounded batches; the orders
// stay, open and recent orders keep everything, and the feed stays a run a cursor reads on from.
import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import { buildApiApp } from '../../src/api/app.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import type { OrderStore } from '../../src/store/order-store.js';
import { runRetentionPass, startRetention } from '../../src/worker/store-retention.js';
import { defaultApiLimits, sendApi } from '../helpers/api.js';
import { type ManualClock, rewindToSchema26, snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';
import { waitFor } from '../helpers/wait.js';

const DAY = 86_400_000;
const RETENTION = { feedRetentionMs: 30 * DAY, historyRetentionMs: 90 * DAY };

/** An order taken through `statuses` by the upstream's webhooks, one a minute, each notified once. */
async function orderThrough(
  store: OrderStore,
  clock: ManualClock,
  ref: string,
  statuses: Array<[string, Record<string, unknown>?]>,
  endpointId: number,
) {
  const createdAt = new Date(clock.now()).toISOString();
  for (const [i, [status, extra]] of statuses.entries()) {
    clock.advance(60_000);
    await store.writer.applyOrderSnapshot(snapshot(ref, status, { created_at: createdAt, ...extra }), {
      source: 'webhook',
      eventId: `${ref}-${i}`,
    });
    const event = (await store.feed.after((await store.feed.lastSeq()) - 1, 1))[0]!;
    await store.deliveries.record({
      endpointId,
      seq: event.seq,
      type: event.type,
      partnerRef: ref,
      attempt: 1,
      requestedAt: clock.now(),
      status: 200,
      durationMs: 3,
      error: null,
      outcome: 'delivered',
    });
  }
}

/** How many rows of `table` are about `ref` (its `partner_ref`). */
async function rowsOf(store: OrderStore, table: string, ref: string): Promise<number> {
  const row = await store.context.db.get<{ n: number }>(
    `SELECT COUNT(*) AS n FROM ${table} WHERE partner_ref = @ref`,
    { ref },
  );
  return Number(row?.n ?? 0);
}

async function historyOf(store: OrderStore, ref: string) {
  return {
    events: (await store.queries.listEvents(ref)).length,
    deliveries: await rowsOf(store, 'notify_deliveries', ref),
  };
}

async function startApi(t: Pick<TestContext, 'after'>, store: OrderStore) {
  const app = await buildApiApp({ store, ...defaultApiLimits(), requestPoll: async () => {} });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.after(() => app.close());
  const { port } = app.server.address() as { port: number };
  const token = (await store.tokens.create('shop', ['orders:read'])).token;
  return (path: string) => sendApi(`http://127.0.0.1:${port}`, token, 'GET', path);
}

describeEachBackend('the history retention', (backend) => {
  test('old final orders lose their history and keep the order and its public view; open and recent orders keep everything', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const get = await startApi(t, store);
    const endpoint = await store.endpoints.add({
      url: 'http://127.0.0.1:9/hook',
      events: ['order.*'],
      secret: generateEndpointSecret(),
    });
    const done: Array<[string, Record<string, unknown>?]> = [
      ['PENDING'],
      ['PROCESSING'],
      ['PROCESSING'], // a duplicate webhook: recorded, no change
      ['SUCCESS', { serial_number: 'SN-1' }],
    ];
    await orderThrough(store, clock, 'OLD-DONE', done, endpoint.id);
    await orderThrough(store, clock, 'OLD-FAILED', [['PENDING'], ['FAILED']], endpoint.id);
    await store.writer.createLocalOrder({ partnerRef: 'OLD-REJECTED', productCode: 'ML86', data: {} });
    await store.writer.markRejected('OLD-REJECTED', 'INVALID_TARGET', 'bad user id');
    await orderThrough(store, clock, 'OLD-OPEN', [['PENDING'], ['PROCESSING']], endpoint.id);
    // Never sent (no worker ran since): not final, though nothing polls it either.
    await store.writer.createLocalOrder({
      partnerRef: 'OLD-QUEUED',
      productCode: 'ML86',
      data: {},
      queued: true,
    });
    await orderThrough(store, clock, 'OLD-NO-SERIAL', [['PENDING'], ['SUCCESS']], endpoint.id);
    await store.deliveries.record({
      endpointId: endpoint.id,
      seq: 0,
      type: 'balance.low',
      partnerRef: null,
      attempt: 1,
      requestedAt: clock.now(),
      status: 200,
      durationMs: 2,
      error: null,
      outcome: 'delivered',
    });
    clock.advance(100 * DAY);
    await orderThrough(store, clock, 'RECENT-DONE', done, endpoint.id);
    clock.advance(DAY);

    const refs = [
      'OLD-DONE',
      'OLD-FAILED',
      'OLD-REJECTED',
      'OLD-OPEN',
      'OLD-QUEUED',
      'OLD-NO-SERIAL',
      'RECENT-DONE',
    ];
    const before = new Map<string, unknown>();
    for (const ref of refs) before.set(ref, (await get(`/v1/orders/${ref}`)).body);
    const kept = {
      open: await historyOf(store, 'OLD-OPEN'),
      noSerial: await historyOf(store, 'OLD-NO-SERIAL'),
      recent: await historyOf(store, 'RECENT-DONE'),
    };
    assert.deepEqual(kept.recent, { events: 4, deliveries: 4 });
    const recentFeed = await store.feed.after(0, 1000);

    const pass = await runRetentionPass(store, RETENTION);

    assert.deepEqual(
      { orders: pass.orders, orderEvents: pass.orderEvents, deliveries: pass.deliveries },
      { orders: 3, orderEvents: 4 + 2 + 1, deliveries: 4 + 2 + 1 },
      'the three old final orders, and the record of the low balance',
    );
    for (const ref of ['OLD-DONE', 'OLD-FAILED', 'OLD-REJECTED']) {
      assert.deepEqual(await historyOf(store, ref), { events: 0, deliveries: 0 }, ref);
      assert.equal(await rowsOf(store, 'feed_events', ref), 0, `${ref}: no feed event left`);
    }
    for (const ref of refs) {
      const answer = await get(`/v1/orders/${ref}`);
      assert.equal(answer.status, 200, ref);
      assert.deepEqual(answer.body, before.get(ref), `${ref}: the order as the shop saw it before`);
    }
    assert.deepEqual(await historyOf(store, 'OLD-OPEN'), kept.open, 'an open order keeps its history');
    assert.deepEqual(
      await historyOf(store, 'OLD-NO-SERIAL'),
      kept.noSerial,
      'a SUCCESS still waiting for its serial is open',
    );
    assert.deepEqual(await historyOf(store, 'RECENT-DONE'), kept.recent);
    const marked = await store.context.db.all<{ partner_ref: string }>(
      'SELECT partner_ref FROM orders WHERE history_pruned_at IS NOT NULL ORDER BY id',
    );
    assert.deepEqual(
      marked.map((r) => r.partner_ref),
      ['OLD-DONE', 'OLD-FAILED', 'OLD-REJECTED'],
      'only final orders are marked pruned',
    );
    assert.deepEqual(
      (await store.feed.after(0, 1000)).map((e) => e.seq),
      recentFeed
        .filter((e) => e.timestamp >= new Date(clock.now() - 30 * DAY).toISOString())
        .map((e) => e.seq),
      'the feed lost only its events older than its own retention',
    );

    const again = await runRetentionPass(store, RETENTION);
    assert.equal(
      again.orders + again.orderEvents + again.deliveries,
      0,
      'a pruned order is not pruned again',
    );

    // A refund long after: recorded and told as ever, and pruned in its turn.
    await store.writer.applyOrderSnapshot(snapshot('OLD-DONE', 'REFUNDED', { serial_number: 'SN-1' }), {
      source: 'webhook',
      eventId: 'late-refund',
    });
    assert.equal((await get('/v1/orders/OLD-DONE')).body.status, 'REFUNDED');
    assert.deepEqual(
      (await store.queries.listEvents('OLD-DONE')).map((e) => e.status),
      ['REFUNDED'],
    );
    assert.equal((await runRetentionPass(store, RETENTION)).orderEvents, 0, 'a recent change is kept');
    clock.advance(91 * DAY);
    const later = await runRetentionPass(store, RETENTION);
    assert.equal(later.orderEvents, 1 + 4, 'the refund, and RECENT-DONE, now old too');
    assert.equal((await store.queries.listEvents('OLD-DONE')).length, 0);
    assert.equal(
      Number((await store.context.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM orders'))?.n),
      refs.length,
      'every order stays',
    );
  });

  test('a batch deletes at most its bound of rows, and the batches after it finish the order', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const endpoint = await store.endpoints.add({
      url: 'http://127.0.0.1:9/hook',
      events: ['order.*'],
      secret: generateEndpointSecret(),
    });
    const many: Array<[string, Record<string, unknown>?]> = [['PENDING']];
    for (let i = 0; i < 9; i++) many.push(['PROCESSING']);
    many.push(['FAILED']);
    for (const ref of ['A', 'B']) await orderThrough(store, clock, ref, many, endpoint.id);
    const rows = 2 * (11 + 11);
    clock.advance(100 * DAY);
    const before = clock.now() - 90 * DAY;

    const counts: number[] = [];
    for (;;) {
      const batch = await store.retention.pruneBatch(before, 5);
      counts.push(batch.orderEvents + batch.deliveries);
      if (!batch.more) break;
    }
    assert.ok(
      counts.every((n) => n <= 5),
      `every batch within its bound: ${counts}`,
    );
    assert.equal(
      counts.reduce((a, b) => a + b, 0),
      rows,
    );
    assert.ok(counts.length >= rows / 5);
    for (const ref of ['A', 'B']) assert.deepEqual(await historyOf(store, ref), { events: 0, deliveries: 0 });
    await assert.rejects(() => store.retention.pruneBatch(before, 0), RangeError);
  });

  test('the feed stays a run of consecutive events: a cursor inside the window reads on as before, and seqs are never reused', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const endpoint = await store.endpoints.add({
      url: 'http://127.0.0.1:9/hook',
      events: ['order.*'],
      secret: generateEndpointSecret(),
    });
    const done: Array<[string, Record<string, unknown>?]> = [
      ['PENDING'],
      ['SUCCESS', { serial_number: 'S' }],
    ];
    await orderThrough(store, clock, 'EARLY', done, endpoint.id);
    const lastPruned = await store.feed.lastSeq();
    clock.advance(40 * DAY);
    await orderThrough(store, clock, 'MIDDLE', done, endpoint.id);
    const cursor = (await store.feed.after(lastPruned, 1))[0]!.seq;
    await orderThrough(store, clock, 'LATE', done, endpoint.id);
    const readOn = await store.feed.after(cursor, 1000);

    await runRetentionPass(store, { feedRetentionMs: 30 * DAY, historyRetentionMs: 30 * DAY });

    const kept = (await store.feed.after(0, 1000)).map((e) => e.seq);
    assert.ok(kept[0]! > lastPruned, 'only the oldest end went');
    assert.deepEqual(
      kept,
      Array.from({ length: kept.length }, (_, i) => kept[0]! + i),
      'no hole inside the window',
    );
    assert.deepEqual(
      await store.feed.after(cursor, 1000),
      readOn,
      'a cursor in the window reads on unchanged',
    );
    await store.feed.prune(0);
    await orderThrough(store, clock, 'NEXT', done.slice(0, 1), endpoint.id);
    assert.ok((await store.feed.lastSeq()) > readOn.at(-1)!.seq, 'a seq is never used twice');
  });

  test('a store written before schema 28 upgrades, and its old final orders are pruned like any', async (t) => {
    const { store, url, clock } = await backend.tempStore(t);
    const endpoint = await store.endpoints.add({
      url: 'http://127.0.0.1:9/hook',
      events: ['order.*'],
      secret: generateEndpointSecret(),
    });
    await orderThrough(store, clock, 'BEFORE', [['PENDING'], ['FAILED']], endpoint.id);
    await store.db.write((tx) => rewindToSchema26(tx));
    await store.close();

    const reopened = await backend.open(t, url, { now: clock.now });
    clock.advance(100 * DAY);
    const pass = await runRetentionPass(reopened, RETENTION);
    assert.deepEqual([pass.orders, pass.orderEvents, pass.deliveries], [1, 2, 2]);
    assert.equal((await reopened.queries.getPublicOrder('BEFORE'))?.status, 'FAILED');
  });

  test("the worker's schedule runs a pass at once and logs what it pruned; its stop waits for the pass", async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const endpoint = await store.endpoints.add({
      url: 'http://127.0.0.1:9/hook',
      events: ['order.*'],
      secret: generateEndpointSecret(),
    });
    await orderThrough(store, clock, 'DONE', [['PENDING'], ['FAILED']], endpoint.id);
    clock.advance(100 * DAY);
    const logged: Array<Record<string, number>> = [];
    const stop = startRetention(store, RETENTION, {
      info: (pass: Record<string, number>) => logged.push(pass),
      warn: () => {},
    } as never);
    await waitFor(() => logged.length === 1, { message: 'a pass at start' });
    assert.equal(await stop(), true);
    assert.deepEqual(
      [logged[0]!.orders, logged[0]!.orderEvents, logged[0]!.deliveries, logged[0]!.feedEvents],
      [1, 2, 2, 2],
    );
    assert.deepEqual(await historyOf(store, 'DONE'), { events: 0, deliveries: 0 });
  });

  test('an old final order whose notification is still to deliver keeps its history until it leaves the outbox', async (t) => {
    const { store, clock } = await backend.tempStore(t);
    const endpoint = await store.endpoints.add({
      url: 'http://127.0.0.1:9/hook',
      events: ['order.*'],
      secret: generateEndpointSecret(),
    });
    await orderThrough(store, clock, 'WAITING', [['PENDING'], ['FAILED']], endpoint.id);
    // Its last notification still to deliver (an endpoint retrying it).
    await store.context.db.run(
      `INSERT INTO notify_outbox (endpoint_id, seq, partner_ref, attempt, next_at)
       VALUES (@endpoint, @seq, 'WAITING', 2, @at)`,
      { endpoint: endpoint.id, seq: await store.feed.lastSeq(), at: clock.now() },
    );
    clock.advance(100 * DAY);

    assert.equal((await runRetentionPass(store, RETENTION)).orders, 0);
    assert.deepEqual(await historyOf(store, 'WAITING'), { events: 2, deliveries: 2 });

    await store.context.db.run('DELETE FROM notify_outbox'); // delivered, given up or skipped
    assert.equal((await runRetentionPass(store, RETENTION)).orders, 1);
    assert.deepEqual(await historyOf(store, 'WAITING'), { events: 0, deliveries: 0 });
  });
});
