// The shop API while its PostgreSQL store has no writable server (a failover: docs/api.md,
// "Errors"): an order is answered 503 STORE_UNAVAILABLE with Retry-After, nothing is stored,
// and the same request once the server is writable again places the one order.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import postgres from 'postgres';
import { request } from 'undici';
import { buildApiApp } from '../../src/api/app.js';
import { openStore } from '../../src/store/open-store.js';
import { defaultApiLimits } from '../helpers/api.js';
import { privatePostgres } from '../helpers/postgres.js';

test('an order while the store has no writable server is 503 STORE_UNAVAILABLE with Retry-After and nothing stored; the same request once it is writable places one order', async (t) => {
  const server = await privatePostgres(t);
  const store = await openStore(server.url, { role: 'api' });
  t.after(() => store.close());
  const app = await buildApiApp({ store, ...defaultApiLimits(), requestPoll: async () => {} });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.after(() => app.close());
  const { port } = app.server.address() as { port: number };
  const { token } = await store.tokens.create('till', ['orders:write', 'orders:read']);
  const placeOrder = async () => {
    const answer = await request(`http://127.0.0.1:${port}/v1/orders`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        partner_ref: 'SHOP-1',
        product_code: 'MLBB-86',
        data: { user_id: '12345678', server_id: '2001' },
      }),
    });
    // biome-ignore lint/suspicious/noExplicitAny: an order or an error
    return { status: answer.statusCode, headers: answer.headers, body: (await answer.body.json()) as any };
  };
  const admin = postgres(server.url, { max: 1, onnotice: () => {} });
  t.after(() => admin.end());
  const database = new URL(server.url).pathname.slice(1);
  const orderCount = async () => Number((await admin`SELECT count(*) AS n FROM orders`)[0]!.n);

  // As when the server behind the store's URL turns read-only (a primary fenced, or restarted
  // as a standby before the promotion): new sessions are read-only, and the API's are cut.
  await admin.unsafe(`ALTER DATABASE ${database} SET default_transaction_read_only = on`);
  await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'h2h-sync api'`;
  const during = await placeOrder();
  assert.deepEqual(
    [during.status, during.body.error?.code, during.headers['retry-after']],
    [503, 'STORE_UNAVAILABLE', '2'],
  );
  assert.match(during.body.error.message, /retry the same request/);
  assert.equal(await orderCount(), 0, 'nothing stored');

  await admin.unsafe(`ALTER DATABASE ${database} RESET default_transaction_read_only`);
  const after = await placeOrder();
  assert.equal(after.status, 202, JSON.stringify(after.body));
  assert.equal(after.body.partner_ref, 'SHOP-1');
  assert.equal(await orderCount(), 1);
});
