/**
 * Webhook receiver throughput against a bare Fastify route (issue 10: on the 2-core machine, with
 * Redis on AOF `appendfsync everysec`, the receiver keeps at least a third (0.33×) of the bare
 * route's requests/s, with p99 under 15 ms at 50 connections, adding each webhook with BullMQ's
 * public `queue.add`).
 *
 * One run, one process tree: a private redis-server (AOF, everysec); the bare route
 * (`bench/bare-route.ts`, answers 204) and the real `h2h-sync receiver` (verify, enqueue, 200
 * once Redis acknowledged), each in a child process so that neither shares its event loop with
 * autocannon, which runs here. Both servers are up for the whole run: each gets a warm-up, then
 * they are measured alternately, --rounds times, under the same load (same duration and
 * connections), and each request is a unique, validly signed `order.updated` event of the size
 * the simulator sends. Short alternating rounds put both sides of each ratio under the same
 * conditions of a shared machine, whose speed drifts over tens of seconds.
 *
 *   npm run bench:receiver -- [--duration 5] [--connections 50] [--warmup 3] [--rounds 5]
 *                             [--min-ratio 0.33] [--max-p99 15] [--cpu-prof DIR]
 *
 * Prints requests/s and latency p50/p99 of both in each round, their ratio, and the CPU time
 * each process spent per 1,000 requests (server, Redis, autocannon) with the machine's idle
 * share: the throughput figures move with other load on the machine, the CPU costs much less.
 * The verdict takes the median ratio and the median receiver p99 of the rounds.
 *
 * Exits 1 when the ratio is under --min-ratio or the receiver's p99 is not under --max-p99 ms,
 * on any non-2xx, socket error or timeout, or when an event answered 2xx is not in Redis (after
 * each receiver run every acknowledged event is looked up by its job id; the only other jobs
 * allowed are those of requests cut in flight when a run ends).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { startRedisServer } from '../src/dev/redis-server.js';
import { DEFAULT_QUEUE_PREFIX, WEBHOOK_QUEUE, webhookIdentity } from '../src/queue/webhook-queue.js';
import { signWebhook } from '../src/upstream/signature.js';
import { type AutocannonRequest, type AutocannonResult, autocannon } from './autocannon.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SECRET = 'bench_secret_receiver';

const { values: flags } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
    warmup: { type: 'string', default: '3' },
    'min-ratio': { type: 'string', default: '0.33' },
    'max-p99': { type: 'string', default: '15' },
    /** Measures bare route and receiver this many times, alternately; the verdict takes the medians. */
    rounds: { type: 'string', default: '5' },
    /** Writes a V8 CPU profile of each server process into this directory. */
    'cpu-prof': { type: 'string' },
  },
});
const duration = Number(flags.duration);
const connections = Number(flags.connections);
const warmup = Number(flags.warmup);
const minRatio = Number(flags['min-ratio']);
const maxP99 = Number(flags['max-p99']);
const rounds = Number(flags.rounds);
for (const [name, value] of Object.entries({ duration, connections, warmup, minRatio, maxP99, rounds })) {
  if (!Number.isFinite(value) || value < 0) throw new TypeError(`--${name} must be a number ≥ 0`);
}

const round = (n: number, digits = 0) => Number(n.toFixed(digits));

/** What autocannon keeps per connection between a request and its answer. */
interface DeliveryContext {
  eventId?: string;
}

/** Unique, validly signed deliveries, and which of them were answered 2xx. */
class DeliveryLog {
  readonly sent = new Set<string>();
  readonly acknowledged = new Set<string>();
  private sequence = 0;
  private readonly run = randomBytes(4).toString('hex');

  /** An autocannon request that sends a new event each time and records 2xx answers. */
  request(path: string): AutocannonRequest<DeliveryContext> {
    return {
      method: 'POST',
      path,
      setupRequest: (req, context) => {
        const { eventId, body, headers } = this.next();
        context.eventId = eventId;
        return { ...req, body, headers };
      },
      onResponse: (status, _body, context) => {
        if (status >= 200 && status < 300 && context.eventId) this.acknowledged.add(context.eventId);
      },
    };
  }

  /** A webhook as the simulator sends it (decisions.md, "Webhooks"): ~600 bytes of JSON. */
  next(): { eventId: string; body: string; headers: Record<string, string> } {
    this.sequence += 1;
    const n = this.sequence;
    const eventId = `evt_${this.run}_${n}`;
    const now = new Date().toISOString();
    const body = JSON.stringify({
      event_id: eventId,
      event: 'order.updated',
      created_at: now,
      data: {
        invoice_number: `INV-20261121-${this.run}-${String(n).padStart(8, '0')}`,
        partner_ref: `bench-${this.run}-${n}`,
        status: 'SUCCESS',
        amount: 19_850,
        target: `${100_000_000 + (n % 900_000_000)}(2001)`,
        product_name: 'Mobile Legends: Bang Bang — 86 Diamonds (78 + 8 bonus), instant top-up',
        product_code: 'MLBB-86',
        serial_number: `SN-${this.run}-${String(n).padStart(10, '0')}-MLBB86-000000000000000000000000000000000000000000`,
        nickname: 'BenchPlayer#2001 (Asia)',
        message: null,
        created_at: now,
        success_at: now,
      },
    });
    const timestamp = String(Math.floor(Date.now() / 1000));
    this.sent.add(eventId);
    return {
      eventId,
      body,
      headers: {
        'content-type': 'application/json',
        'x-timestamp': timestamp,
        'x-signature': signWebhook(SECRET, timestamp, body),
        'x-event-id': eventId,
        'x-event-type': 'order.updated',
      },
    };
  }
}

interface ServerProcess {
  child: ChildProcess;
  url: string;
}

/** Spawns a server and resolves once `found(output)` returns its URL. */
function spawnServer(args: string[], env: NodeJS.ProcessEnv, found: (output: string) => string | undefined) {
  const profile = flags['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${flags['cpu-prof']}`] : [];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise<ServerProcess>((resolve, reject) => {
    let output = '';
    const timer = setTimeout(
      () => reject(new Error(`${args.join(' ')} did not listen within 30 s:\n${output}`)),
      30_000,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const url = found(output);
      if (url) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        child.stdout?.resume();
        child.stderr?.off('data', onError);
        child.stderr?.pipe(process.stderr); // a server's warnings and errors stay visible
        resolve({ child, url });
      }
    };
    child.stdout?.on('data', onData);
    const onError = (chunk: Buffer) => {
      output += chunk.toString();
    };
    child.stderr?.on('data', onError);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${args.join(' ')} exited with ${code} before listening:\n${output}`));
    });
  });
}

function stopServer({ child }: ServerProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.removeAllListeners('exit');
    child.once('exit', (code) => {
      clearTimeout(kill);
      resolve(code);
    });
    child.kill('SIGTERM');
  });
}

/** CPU time a process has used so far, in ms (user, system); undefined off Linux. */
function cpuTimes(pid: number | undefined): { user: number; system: number } | undefined {
  if (pid === undefined) return undefined;
  try {
    // Fields 14 and 15 of /proc/<pid>/stat (utime, stime), after the parenthesised command name.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return { user: Number(fields[11]) * 10, system: Number(fields[12]) * 10 }; // USER_HZ is 100
  } catch {
    return undefined;
  }
}

/** Idle and total jiffies of the whole machine so far (first line of /proc/stat); undefined off Linux. */
function machineTicks(): { idle: number; total: number } | undefined {
  try {
    const values = readFileSync('/proc/stat', 'utf8')
      .split('\n')[0]!
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    return { idle: (values[3] ?? 0) + (values[4] ?? 0), total: values.reduce((a, b) => a + b, 0) };
  } catch {
    return undefined;
  }
}

/** CPU ms per 1,000 answered requests of each process during the measured run. */
interface CpuPerThousand {
  /** The server process, user + system. */
  server?: number;
  /** Of which system (kernel: sockets, syscalls). */
  serverSystem?: number;
  redis?: number;
  loadGenerator: number;
  /** Share of the machine's CPU time left idle during the run, in %. */
  machineIdlePercent?: number;
}

interface Measurement {
  name: string;
  result: AutocannonResult;
  requestsPerS: number;
  loadBefore: number;
  cpu: CpuPerThousand;
  log: DeliveryLog;
}

/** Loads a server for `seconds` without measuring: JIT, connection pools and caches warm up. */
async function warmUp(server: ServerProcess): Promise<number> {
  const log = new DeliveryLog();
  const { origin, pathname } = new URL(server.url);
  const warm = await autocannon({
    url: origin,
    connections,
    duration: warmup,
    requests: [log.request(pathname)],
  });
  return warm.non2xx + warm.errors + warm.timeouts;
}

/** One measured run against a server that is already up and warm. */
async function measure(name: string, server: ServerProcess, redisPid?: number): Promise<Measurement> {
  const log = new DeliveryLog();
  const { origin, pathname } = new URL(server.url);
  const loadBefore = loadavg()[0] ?? 0;
  const before = {
    server: cpuTimes(server.child.pid),
    redis: cpuTimes(redisPid),
    self: process.cpuUsage(),
    machine: machineTicks(),
  };
  const result = await autocannon({
    url: origin,
    connections,
    duration,
    requests: [log.request(pathname)],
  });
  const self = process.cpuUsage(before.self);
  const after = { server: cpuTimes(server.child.pid), redis: cpuTimes(redisPid), machine: machineTicks() };
  const machineIdlePercent =
    before.machine && after.machine
      ? round(
          (100 * (after.machine.idle - before.machine.idle)) / (after.machine.total - before.machine.total),
        )
      : undefined;
  const perThousand = (ms: number) => round((ms * 1000) / result.requests.total, 1);
  const used = (start?: { user: number; system: number }, end?: { user: number; system: number }) =>
    start && end
      ? {
          total: perThousand(end.user + end.system - start.user - start.system),
          system: perThousand(end.system - start.system),
        }
      : undefined;
  const serverCpu = used(before.server, after.server);
  return {
    name,
    result,
    requestsPerS: result.requests.total / result.duration,
    loadBefore,
    cpu: {
      server: serverCpu?.total,
      serverSystem: serverCpu?.system,
      redis: used(before.redis, after.redis)?.total,
      loadGenerator: perThousand((self.user + self.system) / 1000),
      ...(machineIdlePercent === undefined ? {} : { machineIdlePercent }),
    },
    log,
  };
}

async function serverPid(redisUrl: string): Promise<number | undefined> {
  const redis = new Redis(redisUrl);
  try {
    return Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1]) || undefined;
  } finally {
    redis.disconnect();
  }
}

interface QueueCheck {
  jobs: number;
  acknowledged: number;
  missing: number;
  unknown: number;
}

/**
 * Every acknowledged event must be in Redis; any other job must be a request cut in flight.
 * Then empties Redis for the next round.
 */
async function checkQueue(redisUrl: string, log: DeliveryLog): Promise<QueueCheck> {
  const redis = new Redis(redisUrl);
  const queue = new Queue(WEBHOOK_QUEUE, { connection: redis, prefix: DEFAULT_QUEUE_PREFIX });
  try {
    // No worker runs: every job the receiver added is waiting.
    const jobIds = new Set(await queue.getRanges(['wait'], 0, -1));
    const idOf = (eventId: string) =>
      webhookIdentity(Buffer.from(JSON.stringify({ event_id: eventId }))).jobId;
    let missing = 0;
    for (const eventId of log.acknowledged) if (!jobIds.has(idOf(eventId))) missing += 1;
    const sentIds = new Set([...log.sent].map(idOf));
    let unknown = 0;
    for (const jobId of jobIds) if (!sentIds.has(jobId)) unknown += 1;
    await redis.flushall();
    return { jobs: jobIds.size, acknowledged: log.acknowledged.size, missing, unknown };
  } finally {
    await queue.close();
    redis.disconnect();
  }
}

async function flushRedis(redisUrl: string): Promise<void> {
  const redis = new Redis(redisUrl);
  try {
    await redis.flushall();
  } finally {
    redis.disconnect();
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((x, y) => x - y);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

function figures(m: Measurement) {
  return {
    requests_per_s: round(m.requestsPerS),
    latency_ms: { p50: m.result.latency.p50, p99: m.result.latency.p99, max: m.result.latency.max },
    answered_2xx: m.result['2xx'],
    non_2xx: m.result.non2xx,
    errors: m.result.errors,
    timeouts: m.result.timeouts,
    load_average_1m_before: round(m.loadBefore, 2),
    cpu_ms_per_1000_requests: m.cpu,
  };
}

function line(m: Measurement): string {
  const { cpu, result } = m;
  return (
    `${m.name.padEnd(28)} ${String(round(m.requestsPerS)).padStart(7)} req/s  ` +
    `p50 ${result.latency.p50} ms  p99 ${result.latency.p99} ms  ` +
    `CPU ms/1k req: server ${cpu.server ?? '?'} (sys ${cpu.serverSystem ?? '?'}), redis ${cpu.redis ?? '?'}, ` +
    `autocannon ${cpu.loadGenerator}; machine idle ${cpu.machineIdlePercent ?? '?'}%`
  );
}

async function main(): Promise<number> {
  const redis = await startRedisServer({ appendOnly: true }); // appendfsync everysec
  try {
    const redisPid = await serverPid(redis.url);
    const failures: string[] = [];
    const results: { bare: Measurement; receiver: Measurement; ratio: number; queue: QueueCheck }[] = [];
    // Both servers stay up for the whole run and are measured alternately, in short rounds, so
    // that each ratio compares two runs made under the same conditions of a shared machine.
    const bareServer = await spawnServer(
      ['bench/bare-route.ts'],
      {},
      (out) => /listening (\S+)/.exec(out)?.[1],
    );
    const receiverServer = await spawnServer(
      ['src/cli/main.ts', 'receiver'],
      {
        H2H_API_SECRET: SECRET,
        REDIS_URL: redis.url,
        HOST: '127.0.0.1',
        PORT: '0',
        H2H_RECEIVER_METRICS_PORT: '0',
        LOG_LEVEL: 'info',
      },
      (out) => (/"msg":"receiver listening"/.test(out) ? /"url":"([^"]+)"/.exec(out)?.[1] : undefined),
    );
    try {
      const warmupFailures = { bare: await warmUp(bareServer), receiver: await warmUp(receiverServer) };
      await flushRedis(redis.url); // the warm-up's jobs are not checked
      for (const [name, count] of Object.entries(warmupFailures)) {
        if (count > 0) failures.push(`warm-up of the ${name}: ${count} non-2xx, errors or timeouts`);
      }
      for (let n = 1; n <= rounds; n++) {
        const bare = await measure('bare Fastify route (204)', bareServer);
        const receiver = await measure('receiver (verify + enqueue)', receiverServer, redisPid);
        const queue = await checkQueue(redis.url, receiver.log);
        const ratio = receiver.requestsPerS / bare.requestsPerS;
        results.push({ bare, receiver, ratio, queue });
        const where = rounds > 1 ? `round ${n}: ` : '';
        for (const m of [bare, receiver]) {
          const { non2xx, errors, timeouts } = m.result;
          if (non2xx + errors + timeouts > 0) {
            failures.push(`${where}${m.name}: ${non2xx} non-2xx, ${errors} errors, ${timeouts} timeouts`);
          }
        }
        if (queue.missing > 0) failures.push(`${where}${queue.missing} events answered 2xx are not in Redis`);
        if (queue.unknown > 0) failures.push(`${where}${queue.unknown} jobs in Redis match no event sent`);
        if (queue.jobs - queue.acknowledged > 2 * connections) {
          failures.push(
            `${where}${queue.jobs - queue.acknowledged} jobs beyond the 2xx answers: more than the requests in flight`,
          );
        }
        if (rounds > 1)
          process.stdout.write(
            `${where}${line(bare)}\n${where}${line(receiver)}\n${where}ratio ${ratio.toFixed(3)}\n`,
          );
      }
    } finally {
      for (const server of [bareServer, receiverServer]) {
        const code = await stopServer(server);
        if (code !== 0)
          process.stderr.write(`${server.child.spawnargs.join(' ')} exited with code ${code}\n`);
      }
    }

    const ratio = median(results.map((r) => r.ratio));
    const p99 = median(results.map((r) => r.receiver.result.latency.p99));
    if (ratio < minRatio) failures.push(`ratio ${ratio.toFixed(3)} is under ${minRatio}`);
    if (!(p99 < maxP99)) failures.push(`receiver p99 ${p99} ms is not under ${maxP99} ms`);

    const summary = {
      date: new Date().toISOString(),
      machine: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}`,
      command: `npm run bench:receiver -- --duration ${duration} --connections ${connections} --warmup ${warmup} --rounds ${rounds}`,
      body_bytes: Buffer.byteLength(new DeliveryLog().next().body),
      rounds: results.map(({ bare, receiver, ratio: r, queue }) => ({
        bare: figures(bare),
        receiver: figures(receiver),
        ratio: round(r, 3),
        queue: {
          events_answered_2xx: queue.acknowledged,
          jobs_in_redis: queue.jobs,
          answered_2xx_missing_from_redis: queue.missing,
          jobs_of_requests_cut_in_flight: queue.jobs - queue.acknowledged + queue.missing,
        },
      })),
      ratio: round(ratio, 3),
      receiver_p99_ms: p99,
      goals: { min_ratio: minRatio, max_p99_ms: maxP99 },
      verdict: failures.length === 0 ? 'PASS' : `FAIL: ${failures.join('; ')}`,
    };
    process.stdout.write(`${JSON.stringify(summary, null, 2)}\n\n`);
    if (rounds === 1) process.stdout.write(`${line(results[0]!.bare)}\n${line(results[0]!.receiver)}\n`);
    const what = rounds > 1 ? `median of ${rounds} rounds: ratio` : 'ratio';
    process.stdout.write(
      `${what} ${ratio.toFixed(3)}, receiver p99 ${p99} ms (goal ≥ ${minRatio}, p99 < ${maxP99} ms) — ${summary.verdict}\n`,
    );
    return failures.length === 0 ? 0 : 1;
  } finally {
    await redis.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
