/**
 * Order-creation throughput of the upstream simulator (issue 2: at least 2,000 orders/s with
 * `--rate-limit 0` on the 2-core machine), so that it is never the bottleneck of later load tests.
 *
 * The simulator runs as `h2h-sync sim` in a child process, so it and the load generator do not
 * share a core. Orders progress in real time (`--time-scale 1` by default) and their webhooks go
 * to a tiny receiver in this process that answers 204, so the run includes the simulator's
 * timers and webhook sends, not only the POST path.
 *
 *   npm run bench:sim -- [--duration 10] [--connections 64] [--time-scale 1] [--min-rate 2000]
 *
 * Prints orders/s, latency p50/p99 and errors; exits 1 below --min-rate, or on any non-2xx,
 * socket error or timeout, or when the simulator's order book disagrees with the 201 count.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { type AutocannonRequest, autocannon } from './autocannon.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DEMO_KEY = 'sim_key_demo_M0001';

const { values: flags } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '64' },
    'time-scale': { type: 'string', default: '1' },
    'min-rate': { type: 'string', default: '2000' },
  },
});
const duration = Number(flags.duration);
const connections = Number(flags.connections);
const timeScale = flags['time-scale'];
const minRate = Number(flags['min-rate']);

/** A webhook receiver that answers 204 at once and counts deliveries. */
async function startWebhookReceiver(): Promise<{ url: string; count: () => number; close: () => void }> {
  let received = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received += 1;
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/webhooks/h2h`,
    count: () => received,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** Spawns `h2h-sync sim` and resolves with its base URL and control API URL once it listens. */
function startSimulatorProcess(): Promise<{ child: ChildProcess; baseUrl: string; controlUrl: string }> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/cli/main.ts',
      'sim',
      '--fixture',
      'fixtures/demo.json',
      '--port',
      '0',
      '--rate-limit',
      '0',
      '--time-scale',
      timeScale,
      '--log-level',
      'warn',
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(
      () => reject(new Error(`simulator did not start within 30 s:\n${output}`)),
      30_000,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const baseUrl = /simulator listening: (\S+)/.exec(output)?.[1];
      const controlUrl = /control API: (\S+)/.exec(output)?.[1];
      if (baseUrl && controlUrl) {
        clearTimeout(timer);
        resolve({ child, baseUrl, controlUrl });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`simulator exited with ${code} before listening:\n${output}`));
    });
  });
}

async function call(url: string, method: 'GET' | 'PATCH', json?: unknown): Promise<unknown> {
  const res = await request(url, {
    method,
    headers: json === undefined ? {} : { 'content-type': 'application/json' },
    body: json === undefined ? undefined : JSON.stringify(json),
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`${method} ${url} answered ${res.statusCode}: ${text}`);
  return JSON.parse(text);
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

async function main(): Promise<number> {
  const receiver = await startWebhookReceiver();
  const { child, baseUrl, controlUrl } = await startSimulatorProcess();
  child.stdout?.resume();
  child.stderr?.resume();
  try {
    // Enough balance for any run, and webhooks to the fast receiver instead of port 3000.
    await call(`${controlUrl}/members/M-0001`, 'PATCH', {
      balance: 1_000_000_000_000,
      webhook_url: receiver.url,
    });

    const run = randomBytes(4).toString('hex');
    let sequence = 0;
    const orderRequest: AutocannonRequest = {
      method: 'POST',
      path: new URL(`${baseUrl}/orders`).pathname,
      headers: { 'content-type': 'application/json', 'x-api-key': DEMO_KEY },
      setupRequest: (req) => {
        sequence += 1;
        return {
          ...req,
          body: JSON.stringify({
            product_code: 'MLBB-86',
            partner_ref: `bench-${run}-${sequence}`,
            data: { user_id: `${100_000_000 + (sequence % 1_000_000)}1`, server_id: '2001' },
          }),
        };
      },
    };
    const origin = new URL(baseUrl).origin;

    // Warm-up (JIT, connection pools); its orders are not counted.
    await autocannon({ url: origin, connections, duration: 2, requests: [orderRequest] });
    const before = ((await call(`${controlUrl}/orders`, 'GET')) as unknown[]).length;

    const result = await autocannon({ url: origin, connections, duration, requests: [orderRequest] });

    const created = result.statusCodeStats['201']?.count ?? 0;
    const inBook = ((await call(`${controlUrl}/orders`, 'GET')) as unknown[]).length - before;
    const ordersPerSecond = created / result.duration;
    const failures: string[] = [];
    if (ordersPerSecond < minRate) failures.push(`below ${minRate} orders/s`);
    if (result.non2xx > 0) failures.push(`${result.non2xx} non-2xx answers`);
    if (result.errors > 0 || result.timeouts > 0) {
      failures.push(`${result.errors} socket errors, ${result.timeouts} timeouts`);
    }
    // autocannon cuts the requests in flight when the time is up: at most one per connection is
    // committed without its 201 being counted. Anything else means a lost or a duplicate order.
    if (inBook < created || inBook > created + connections) {
      failures.push(`${created} answers 201 but ${inBook} new orders in the book`);
    }

    const summary = {
      date: new Date().toISOString(),
      machine: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}`,
      command: `npm run bench:sim -- --duration ${duration} --connections ${connections} --time-scale ${timeScale}`,
      duration_s: result.duration,
      connections,
      orders_created: created,
      orders_per_s: Math.round(ordersPerSecond),
      latency_ms: { p50: result.latency.p50, p99: result.latency.p99, max: result.latency.max },
      non_2xx: result.non2xx,
      errors: result.errors,
      timeouts: result.timeouts,
      webhooks_received: receiver.count(),
      verdict: failures.length === 0 ? 'PASS' : `FAIL: ${failures.join('; ')}`,
    };
    process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
    process.stdout.write(
      `\nsimulator order creation: ${summary.orders_per_s} orders/s, p50 ${summary.latency_ms.p50} ms, ` +
        `p99 ${summary.latency_ms.p99} ms, ${result.non2xx} non-2xx, ${result.errors} errors — ${summary.verdict}\n`,
    );
    return failures.length === 0 ? 0 : 1;
  } finally {
    await stopChild(child);
    receiver.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
