// Two hosts, one store (docs/store-backends.md, "Tests on both backends"): two complete sets of
// processes (receiver, worker with reconciler and notifier, shop API), each in a working
// directory of its own, on one PostgreSQL and one Redis; one set is killed with SIGKILL in the
// middle of a stream of shop orders and upstream webhooks, and the survivor finishes the work.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import { loadConfig } from '../../src/config/config.js';
import { freePort } from '../../src/dev/redis-server.js';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import type { WebhookAttemptRecord } from '../../src/simulator/index.js';
import { isOrderEvent } from '../../src/store/feed.js';
import { openStore } from '../../src/store/open-store.js';
import { runCli } from '../helpers/cli.js';
import { seqOf, verifyNotification } from '../helpers/notify.js';
import { SECRET } from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { DEMO_MEMBERS, startSimulator, userIdEndingIn } from '../helpers/simulator.js';
import { storeBackends } from '../helpers/store-backends.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import { cleanupScope, spawnReady } from '../helpers/worker.js';

const ORDERS = 60;
/** Timelines (docs/simulator.md): SUCCESS with serial, FAILED, refunded after success. */
const SUFFIXES = ['1234', '0002', '0006'];
const FINAL = new Set(['SUCCESS', 'FAILED', 'REFUNDED']);

type HostProcess = Awaited<ReturnType<typeof spawnReady>>;

/** One host: its receiver, worker and API, the ports it listens on, and the webhooks it took. */
interface Host {
  name: string;
  receiverPort: number;
  apiPort: number;
  processes: HostProcess[];
  alive: boolean;
  /** Webhooks its receiver answered with 2xx (counted by the balancer). */
  acknowledged: number;
  /** Of which sent after the host was killed (none can be answered). */
  acknowledgedAfterKill: number;
}

async function startHost(
  t: { after(fn: () => unknown): void },
  name: string,
  env: Record<string, string>,
): Promise<Host> {
  const cwd = mkdtempSync(join(tmpdir(), `h2h-host-${name}-`));
  t.after(() => rmSync(cwd, { recursive: true, force: true }));
  const receiverPort = await freePort();
  const apiPort = await freePort();
  const own = { ...env, PORT: String(receiverPort), API_PORT: String(apiPort) };
  const processes = await Promise.all(
    ['receiver', 'worker', 'api'].map((command) =>
      spawnReady(t, command, { cwd, env: { PATH: process.env.PATH ?? '', ...own } }),
    ),
  );
  return { name, receiverPort, apiPort, processes, alive: true, acknowledged: 0, acknowledgedAfterKill: 0 };
}

/** Kills every process of the host at once, as a lost machine does, and waits for their exits. */
async function killHost(host: Host): Promise<void> {
  host.alive = false;
  await Promise.all(
    host.processes.map(
      ({ child }) =>
        new Promise<void>((resolve) => {
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
}

/**
 * The load balancer in front of the receivers: each webhook goes to the next host in turn; a
 * host that refuses the connection is skipped (as a health-checked balancer does), and when
 * none answers, the upstream gets a 502 and sends the webhook again later.
 */
async function webhookBalancer(
  t: { after(fn: () => unknown): void },
  hosts: Host[],
  path: string,
): Promise<string> {
  let next = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      for (let tried = 0; tried < hosts.length; tried++) {
        const host = hosts[next++ % hosts.length]!;
        // An answer counts for the host as it was when the webhook was sent: one sent just before
        // a kill may be answered and read after the test has noted the kill.
        const sentAfterKill = !host.alive;
        try {
          const answer = await request(`http://127.0.0.1:${host.receiverPort}${path}`, {
            method: 'POST',
            headers: req.headers as Record<string, string>,
            body,
          });
          if (answer.statusCode < 300) {
            host.acknowledged += 1;
            if (sentAfterKill) host.acknowledgedAfterKill += 1;
          }
          res.writeHead(answer.statusCode, { 'content-type': 'application/json' });
          res.end(Buffer.from(await answer.body.arrayBuffer()));
          return;
        } catch {
          // Connection refused or reset: the next host.
        }
      }
      res.writeHead(502).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as { port: number };
  return `http://127.0.0.1:${port}${path}`;
}

test('two hosts on one PostgreSQL and one Redis: one killed with SIGKILL mid-stream, nothing acknowledged is lost, nothing is placed or applied twice, and the survivor finishes the work', async (test) => {
  const t = cleanupScope(test);
  const pg = storeBackends({ H2H_TEST_STORE: 'postgres' })[0]!;
  const redis = await privateRedis(t);
  const dbUrl = await pg.emptyUrl(t);
  const webhookPath = loadConfig({ H2H_API_SECRET: SECRET }).settings.H2H_WEBHOOK_PATH;

  // The shop's side: a token, and an endpoint whose deliveries are verified with standardwebhooks.
  const store = await openStore(dbUrl, { role: 'test' });
  t.after(() => store.close());
  const { token } = await store.tokens.create('two hosts', ['orders:write', 'orders:read']);
  const sink = await startWebhookSink(t, { secrets: [] });
  const endpointSecret = generateEndpointSecret();
  await store.endpoints.add({ url: sink.url, events: ['order.*'], secret: endpointSecret });

  const hosts: Host[] = [];
  const balancerUrl = await webhookBalancer(t, hosts, webhookPath);
  const sim = await startSimulator(t, { webhookUrl: balancerUrl, timeScale: 0.01 });
  await sim.patchMember(DEMO_MEMBERS.reseller, { balance: 1_000_000_000 });
  const env = {
    REDIS_URL: redis.url,
    H2H_DB_URL: dbUrl,
    H2H_API_SECRET: SECRET,
    H2H_API_KEY: sim.member.api_key,
    H2H_BASE_URL: sim.sim.baseUrl,
    H2H_RATE_LIMIT: '60',
    H2H_RATE_WINDOW_MS: '1000',
    // A killed host's jobs, claims and submissions are taken over within a few seconds.
    H2H_WORKER_LOCK_DURATION_MS: '1000',
    H2H_WORKER_STALLED_INTERVAL_MS: '250',
    RECONCILE_LEASE_S: '2',
    H2H_CONNECT_TIMEOUT_MS: '300',
    H2H_HEADERS_TIMEOUT_MS: '700',
    RECONCILE_EVERY_S: '1',
    RECONCILE_FIRST_POLL_DELAY_S: '3',
    H2H_NOTIFY_RETRY_S: '0.05,0.1,0.2,0.5',
    ADMIN_PORT: '0',
    H2H_RECEIVER_METRICS_PORT: '0',
    LOG_LEVEL: 'warn',
  };
  hosts.push(...(await Promise.all([startHost(t, 'a', env), startHost(t, 'b', env)])));
  const [a, b] = hosts as [Host, Host];

  /** The shop: posts to the hosts in turn, and to the other host when one does not answer. */
  const acknowledged = new Set<string>();
  const place = async (i: number) => {
    const ref = `two-${i}`;
    const body = JSON.stringify({
      product_code: 'MLBB-86',
      partner_ref: ref,
      data: { user_id: userIdEndingIn(SUFFIXES[i % SUFFIXES.length]!), server_id: '2001' },
    });
    for (const host of [hosts[i % 2]!, hosts[(i + 1) % 2]!]) {
      try {
        const answer = await request(`http://127.0.0.1:${host.apiPort}/v1/orders`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body,
        });
        const order = (await answer.body.json()) as { partner_ref: string };
        assert.equal(answer.statusCode, 202, JSON.stringify(order));
        acknowledged.add(order.partner_ref);
        return;
      } catch (error) {
        if (host.alive) throw error;
      }
    }
    throw new Error(`no host took ${ref}`);
  };

  // The first half of the stream on both hosts; host a dies once its share is in flight.
  for (let i = 0; i < ORDERS / 2; i += 5) await Promise.all([0, 1, 2, 3, 4].map((k) => place(i + k)));
  await waitFor(async () => (await sim.allOrders()).length >= ORDERS / 4, {
    timeoutMs: 30_000,
    message: 'a quarter of the orders placed upstream before the kill',
  });
  await waitFor(() => a.acknowledged > 0 && b.acknowledged > 0, {
    timeoutMs: 30_000,
    message: 'both receivers acknowledged webhooks before the kill',
  });
  const beforeKill = { b: b.acknowledged };
  await killHost(a);
  for (let i = ORDERS / 2; i < ORDERS; i += 5) await Promise.all([0, 1, 2, 3, 4].map((k) => place(i + k)));
  assert.equal(acknowledged.size, ORDERS, 'every order the shop placed was acknowledged once');

  // The survivor finishes: every order final locally, as the upstream has it.
  const upstreamOf = async () => new Map((await sim.allOrders()).map((o) => [o.partner_ref, o]));
  await waitFor(
    async () => {
      assert.equal(a.acknowledgedAfterKill, 0, 'nothing reached the killed receiver');
      assert.ok(b.acknowledged > beforeKill.b, 'the survivor took the webhooks after the kill');
      const upstream = await upstreamOf();
      if (upstream.size < ORDERS) return false;
      for (const ref of acknowledged) {
        const remote = upstream.get(ref);
        const local = await store.queries.getOrder(ref);
        if (!remote || !FINAL.has(remote.status) || local?.status !== remote.status) return false;
      }
      return true;
    },
    {
      timeoutMs: 90_000,
      intervalMs: 250,
      message: `every order final locally, as upstream (host b alive: ${b.alive})`,
    },
  );

  assert.equal(a.acknowledgedAfterKill, 0, 'nothing reached the killed receiver');
  assert.ok(b.acknowledged > beforeKill.b, 'the survivor took the webhooks after the kill');
  const upstream = await upstreamOf();
  assert.deepEqual(
    [...upstream.keys()].sort(),
    [...acknowledged].sort(),
    'each order placed upstream once, under its ref',
  );

  // Every webhook a receiver acknowledged with 2xx is applied, once.
  const attempts = (await sim.control<WebhookAttemptRecord[]>('/webhooks')).body;
  const delivered = new Set(attempts.filter((x) => x.delivered).map((x) => x.event_id));
  assert.ok(delivered.size >= ORDERS, `webhooks were delivered (${delivered.size})`);
  const applied: string[] = [];
  for (const ref of acknowledged) {
    for (const event of await store.queries.listEvents(ref)) {
      if (event.source === 'webhook' && event.eventId !== null) applied.push(event.eventId);
    }
  }
  assert.equal(new Set(applied).size, applied.length, 'no webhook applied twice');
  for (const id of delivered) assert.ok(applied.includes(id), `the acknowledged webhook ${id} was applied`);

  // The feed has no gap, each order's versions follow each other, and the shop heard every event.
  const feed = await store.feed.after(0, 1000);
  assert.deepEqual(
    feed.map((e) => e.seq),
    feed.map((_, i) => i + 1),
    'feed seqs consecutive',
  );
  const versions = new Map<string, number[]>();
  for (const event of feed) {
    if (isOrderEvent(event)) {
      const ref = event.data.partner_ref;
      versions.set(ref, [...(versions.get(ref) ?? []), event.data.version]);
    }
  }
  for (const [ref, list] of versions) {
    assert.deepEqual(
      list,
      list.map((_, i) => list[0]! + i),
      `${ref}: one feed event per version`,
    );
  }
  const orderSeqs = feed.filter(isOrderEvent).map((e) => e.seq);
  await waitFor(() => new Set(sink.deliveries.map(seqOf)).size >= orderSeqs.length, {
    timeoutMs: 30_000,
    message: `the shop notified of all ${orderSeqs.length} order events`,
  });
  for (const delivery of sink.deliveries) verifyNotification(endpointSecret, delivery);
  assert.deepEqual(
    [...new Set(sink.deliveries.map(seqOf))].sort((x, y) => x - y),
    orderSeqs,
    'every order event notified (a delivery in flight at the kill may come twice, with its webhook-id)',
  );

  // An operator's view from any host: the CLI on the same store.
  const status = await runCli(['status', '--json'], { REDIS_URL: redis.url, H2H_DB_URL: dbUrl });
  assert.equal(status.code, 0, status.stderr);
  const report = JSON.parse(status.stdout) as { orders: { total: number; open: number } };
  assert.deepEqual([report.orders.total, report.orders.open], [ORDERS, 0]);
});
