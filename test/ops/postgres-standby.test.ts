// PostgreSQL with a standby (docs/deployment.md, "Tested topologies"): a primary and a
// synchronous streaming standby; the worker and the shop API's store write orders on a URL that
// lists both hosts with target_session_attrs=read-write; the primary is killed with SIGKILL and
// the standby promoted, and the same processes go on, without a restart, on the promoted server.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import postgres from 'postgres';
import { type OpenedStore, openStore } from '../../src/store/open-store.js';
import { StoreError } from '../../src/store/store-error.js';
import { createEventWorker } from '../../src/worker/event-worker.js';
import { multiHostUrl, privatePostgres, privatePostgresPair } from '../helpers/postgres.js';
import { privateRedis } from '../helpers/redis.js';
import { snapshot } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { cleanupScope, queueSnapshot, testProducer, webhookJobCounts } from '../helpers/worker.js';

const ORDERS = 40;
/** Orders placed (and their webhooks applied) before the primary is killed. */
const BEFORE_KILL = 15;
const DATA = { user_id: '12345678', server_id: '2001' };

async function storeOn(t: { after(fn: () => unknown): void }, url: string, role: 'api' | 'worker') {
  const store = await openStore(url, { role });
  t.after(() => store.close());
  return store;
}

/** The orders on one server, read on a connection of its own: partner_ref → status. */
async function ordersOn(url: string): Promise<Map<string, string>> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql<{ partner_ref: string; status: string }[]>`SELECT partner_ref, status FROM orders`;
    return new Map(rows.map((row) => [row.partner_ref, row.status]));
  } finally {
    await sql.end();
  }
}

/** The port of the server `store`'s writes reach. */
async function writablePort(store: OpenedStore): Promise<number> {
  return store.db.write(async (tx) => {
    const row = await tx.get<{ port: number }>('SELECT inet_server_port() AS port');
    return Number(row?.port);
  });
}

test('a primary killed mid-stream and its synchronous standby promoted: the worker and the API go on without a restart, and every commit made before the kill is on the promoted server', async (test) => {
  const t = cleanupScope(test);
  const { primary, standby } = await privatePostgresPair(t);
  const redis = await privateRedis(t);
  // The standby listed first: before the failover, the stores must pass it by for the primary.
  const url = multiHostUrl(primary.url, [standby.port, primary.port]);
  const api = await storeOn(t, url, 'api');
  const workerStore = await storeOn(t, url, 'worker');
  const worker = createEventWorker({ writer: workerStore.writer, redisUrl: redis.url });
  t.after(() => worker.close({ timeoutMs: 5_000 }));
  await worker.waitUntilReady();
  const producer = await testProducer(t, redis.url);
  assert.equal(
    await writablePort(api),
    primary.port,
    'a URL listing the standby first still writes to the primary',
  );

  /** What the apps were told was committed: a shop order created, an event's job completed. */
  const created: string[] = [];
  const place = async (i: number) => {
    const partnerRef = `FAILOVER-${i}`;
    // As the shop does when the API fails: the same partner_ref again (never a second order).
    await waitFor(
      () =>
        api.writer.createLocalOrder({ partnerRef, productCode: 'ML86', data: DATA }).then(
          () => true,
          (error: unknown) => {
            assert.ok(error instanceof StoreError, `a store error, not ${String(error)}`);
            return false;
          },
        ),
      { timeoutMs: 20_000, message: `${partnerRef} created` },
    );
    created.push(partnerRef);
    await queueSnapshot(producer, snapshot(partnerRef, 'SUCCESS', { serial_number: `SN-${i}` }));
  };
  const succeeded = async () => {
    const orders = await ordersOn(primary.url).catch(() => new Map<string, string>());
    return created.filter((ref) => orders.get(ref) === 'SUCCESS');
  };

  for (let i = 0; i < BEFORE_KILL; i++) await place(i);
  await waitFor(async () => (await succeeded()).length === BEFORE_KILL, {
    message: 'the first webhooks applied',
  });
  // More orders and webhooks on the way while the primary dies.
  const rest = (async () => {
    for (let i = BEFORE_KILL; i < ORDERS; i++) await place(i);
  })();
  await waitFor(() => created.length >= BEFORE_KILL + 3, { message: 'orders placed after the first ones' });
  const seenBeforeKill = await succeeded();
  const createdBeforeKill = [...created];
  await primary.crash();
  await standby.promote();
  await rest;

  await waitFor(
    async () => {
      const counts = await webhookJobCounts(producer);
      return counts.completed === ORDERS;
    },
    { timeoutMs: 20_000, message: 'every webhook applied' },
  );
  const promoted = await ordersOn(standby.url);
  for (const ref of createdBeforeKill)
    assert.ok(promoted.has(ref), `${ref}, created before the kill, is on the standby`);
  for (const ref of seenBeforeKill)
    assert.equal(promoted.get(ref), 'SUCCESS', `${ref}'s applied webhook is kept`);
  assert.equal(promoted.size, ORDERS, 'each order once');
  assert.ok(
    [...promoted.values()].every((status) => status === 'SUCCESS'),
    'every webhook applied on the promoted server',
  );
  assert.equal((await webhookJobCounts(producer)).failed, 0, 'no webhook given up');
  assert.equal(await writablePort(workerStore), standby.port);
});

test('sessions on a server that turned read-only are dropped: the write fails as STORE_UNAVAILABLE, nothing written, and the same store writes once new sessions are writable', async (t) => {
  const server = await privatePostgres(t);
  const store = await storeOn(t, server.url, 'api');
  await store.writer.createLocalOrder({ partnerRef: 'RO-1', productCode: 'ML86', data: DATA });
  const admin = postgres(server.url, { max: 1, onnotice: () => {} });
  t.after(() => admin.end());
  const database = new URL(server.url).pathname.slice(1);
  // As when the server behind the store's name turns read-only (a primary restarted as a
  // standby, a fenced one): its sessions from now on are read-only, and the store's are cut.
  await admin.unsafe(`ALTER DATABASE ${database} SET default_transaction_read_only = on`);
  await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'h2h-sync api'`;
  await assert.rejects(
    store.writer.createLocalOrder({ partnerRef: 'RO-2', productCode: 'ML86', data: DATA }),
    (error: unknown) =>
      error instanceof StoreError &&
      error.code === 'STORE_UNAVAILABLE' &&
      !error.message.includes(new URL(server.url).password),
  );
  assert.equal((await ordersOn(server.url)).has('RO-2'), false, 'nothing written');
  // New sessions are writable again; a session opened while the server was read-only stays so
  // to its end, so the write goes through only if the store dropped them.
  await admin.unsafe(`ALTER DATABASE ${database} RESET default_transaction_read_only`);
  await store.writer.createLocalOrder({ partnerRef: 'RO-2', productCode: 'ML86', data: DATA });
  assert.equal((await ordersOn(server.url)).has('RO-2'), true);
});
