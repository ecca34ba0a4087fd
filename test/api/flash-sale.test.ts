import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { buildApiApp } from '../../src/api/app.js';
import { loadConfig, receiverSettings } from '../../src/config/config.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { startReceiver } from '../../src/receiver/server.js';
import { startWorkerProcess } from '../../src/worker/server.js';
import { defaultApiLimits } from '../helpers/api.js';
import { capturedLogger } from '../helpers/logs.js';
import { verifyNotification } from '../helpers/notify.js';
import { SECRET } from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { DEMO_MEMBERS, startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { openTestStore, scheduleSettings, tempDbPath } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import { cleanupScope } from '../helpers/worker.js';

const ORDERS = 500;
/** The upstream's 60 calls, over a 1 s window instead of a minute, so the sale drains in seconds. */
const RATE = { limit: 60, windowMs: 1000 };

test('a flash sale: 500 orders posted at once all get 202, each is placed upstream exactly once, in arrival order, at the budget’s pace with no 429, every one reaches its final state, and the shop is notified of each', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const dbPath = tempDbPath(t);
  const base = {
    REDIS_URL: redis.url,
    H2H_DB_PATH: dbPath,
    H2H_API_SECRET: SECRET,
    PORT: '0',
    H2H_RECEIVER_METRICS_PORT: '0',
    ADMIN_PORT: '0',
    H2H_RATE_LIMIT: String(RATE.limit),
    H2H_RATE_WINDOW_MS: String(RATE.windowMs),
  };
  const receiver = await startReceiver(receiverSettings(loadConfig(base)));
  t.after(() => receiver.close());
  const simLog = capturedLogger({ name: 'sim', level: 'info' });
  const sim = await startSimulator(t, {
    webhookUrl: receiver.webhookUrl,
    timeScale: 0.01,
    rateLimit: RATE.limit,
    rateWindowMs: RATE.windowMs,
    logger: simLog.logger,
  });
  await sim.patchMember(DEMO_MEMBERS.reseller, { balance: 1_000_000_000 });
  const worker = await startWorkerProcess(
    loadConfig({ ...base, H2H_BASE_URL: sim.sim.baseUrl, H2H_API_KEY: sim.member.api_key }),
  );
  t.after(() => worker.close());

  const store = await openTestStore(dbPath, scheduleSettings());
  t.after(() => store.close());
  const api = await buildApiApp({ store, ...defaultApiLimits(), submissionBacklog: ORDERS });
  await api.listen({ host: '127.0.0.1', port: 0 });
  t.after(() => api.close());
  const { port } = api.server.address() as { port: number };
  const { token } = await store.tokens.create('flash sale', ['orders:write', 'orders:read']);
  // The shop's notification endpoint: every delivery is verified with standardwebhooks.
  const sink = await startWebhookSink(t, { secrets: [] });
  const secret = generateEndpointSecret();
  await store.endpoints.add({ url: sink.url, events: ['order.*'], secret });

  const answers = await Promise.all(
    Array.from({ length: ORDERS }, async (_, i) => {
      const answer = await request(`http://127.0.0.1:${port}/v1/orders`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          product_code: 'MLBB-86',
          partner_ref: `sale-${i}`,
          data: { user_id: userIdEndingIn('1234'), server_id: '2001' },
        }),
      });
      return { status: answer.statusCode, order: (await answer.body.json()) as { submission: string } };
    }),
  );
  assert.deepEqual(
    answers.map((a) => [a.status, a.order.submission]),
    answers.map(() => [202, 'queued']),
  );
  // Arrival order: the order the API wrote them in.
  const arrival = (
    await store.db.all<{ partner_ref: string }>(
      "SELECT partner_ref FROM orders WHERE partner_ref LIKE 'sale-%' ORDER BY id",
    )
  ).map((row) => row.partner_ref);

  await waitFor(async () => (await store.queries.countByStatus()).byStatus.SUCCESS === ORDERS, {
    timeoutMs: 90_000,
    intervalMs: 250,
    message: 'every order of the sale to reach SUCCESS locally',
  });
  const upstream = (await sim.allOrders()).filter((o) => o.partner_ref.startsWith('sale-'));
  assert.equal(upstream.length, ORDERS, 'each order placed upstream exactly once');
  assert.deepEqual(
    [...upstream]
      .sort(
        (a, b) => Number(a.invoice_number.replace(/\D/g, '')) - Number(b.invoice_number.replace(/\D/g, '')),
      )
      .map((o) => o.partner_ref),
    arrival,
    'submitted in arrival order',
  );
  const answered = simLog
    .records()
    .map((r) => (r.res as { statusCode?: number } | undefined)?.statusCode)
    .filter((status) => status !== undefined);
  assert.ok(answered.length >= ORDERS, `the simulator logged its answers (${answered.length})`);
  assert.equal(answered.filter((status) => status === 429).length, 0, 'no 429 from the upstream');
  assert.equal(await store.queries.countQueued(), 0);

  // The shop hears each order's final state, signed (deliveries are read once each).
  const notifiedSuccess = new Set<string>();
  let read = 0;
  await waitFor(
    () => {
      for (; read < sink.deliveries.length; read++) {
        const delivery = sink.deliveries[read]!;
        if (typeof delivery.answer !== 'number' || delivery.answer >= 300) continue;
        const body = verifyNotification(secret, delivery);
        if (body.data.status === 'SUCCESS') notifiedSuccess.add(body.data.partner_ref);
      }
      return notifiedSuccess.size === ORDERS;
    },
    {
      timeoutMs: 60_000,
      intervalMs: 250,
      message: `a SUCCESS notification of every order (${notifiedSuccess.size})`,
    },
  );
  assert.deepEqual([...notifiedSuccess].sort(), [...arrival].sort());
});
