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
 *                             [--min-ratio 0.33] [--max-p99 15] [--replica-acks N] [--cpu-prof DIR]
 *
 * With `--replica-acks N` the private Redis gets a replica (in sync before the first round) and
 * a third server runs, the receiver with H2H_RECEIVER_REPLICA_ACKS=N: each round measures it
 * after the other two, and prints its ratio to the bare route and to the plain receiver, which
 * writes to the same primary with the same replica (docs/performance.md, "The replica wait").
 * Its figures are reported, not judged: the verdict stays the plain receiver's.
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
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { startRedisServer } from '../src/dev/redis-server.js';
import { type AutocannonResult, autocannon } from './autocannon.js';
import { cpuTimes, machineTicks } from './process-cpu.js';
import { checkQueue, commandCalls, flushRedis, type QueueCheck, serverPid } from './receiver-queue.js';
import { DeliveryLog, SECRET } from './webhook-deliveries.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

const { values: flags } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
    warmup: { type: 'string', default: '3' },
    'min-ratio': { type: 'string', default: '0.33' },
    'max-p99': { type: 'string', default: '15' },
    /** Measures bare route and receiver this many times, alternately; the verdict takes the medians. */
    rounds: { type: 'string', default: '5' },
    /**
     * With N > 0, the private Redis gets a replica and a third server is measured in each round:
     * the receiver with H2H_RECEIVER_REPLICA_ACKS=N (a WAIT for N replicas before each 2xx).
     */
    'replica-acks': { type: 'string', default: '0' },
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
const replicaAcks = Number(flags['replica-acks']);
const numbers = { duration, connections, warmup, minRatio, maxP99, rounds, replicaAcks };
for (const [name, value] of Object.entries(numbers)) {
  if (!Number.isFinite(value) || value < 0) throw new TypeError(`--${name} must be a number ≥ 0`);
}

const round = (n: number, digits = 0) => Number(n.toFixed(digits));

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
    const timer = setTimeout(() => {
      child.kill('SIGKILL'); // not left running when the bench gives up
      reject(new Error(`${args.join(' ')} did not listen within 30 s:\n${output}`));
    }, 30_000);
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

/** A replica of `redis` (no AOF of its own), once it is in sync. */
async function startReplica(redis: { port: number }) {
  const replica = await startRedisServer({
    appendOnly: false,
    args: ['--replicaof', '127.0.0.1', String(redis.port)],
  });
  const client = new Redis(replica.url);
  try {
    const deadline = Date.now() + 30_000;
    while (!/master_link_status:up/.test(await client.info('replication'))) {
      if (Date.now() > deadline) throw new Error('the replica did not sync within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    client.disconnect();
  }
  return replica;
}

/** The receiver with the replica wait, its round's figures, and the run's failures. */
interface WaitedRound {
  m: Measurement;
  queue: QueueCheck;
  ratio: number;
  /** Its requests/s over the plain receiver's of the same round. */
  ofReceiver: number;
  /** Webhooks answered 2xx per `WAIT` Redis ran: how many one round trip to the replica covered. */
  perWait: number;
}

/** What a measured receiver run and its queue check must show; each miss is a failure. */
function runFailures(where: string, m: Measurement, queue?: QueueCheck): string[] {
  const found: string[] = [];
  const { non2xx, errors, timeouts } = m.result;
  if (non2xx + errors + timeouts > 0) {
    found.push(`${where}${m.name}: ${non2xx} non-2xx, ${errors} errors, ${timeouts} timeouts`);
  }
  if (!queue) return found;
  if (queue.missing > 0) found.push(`${where}${queue.missing} events answered 2xx are not in Redis`);
  if (queue.unknown > 0) found.push(`${where}${queue.unknown} jobs in Redis match no event sent`);
  if (queue.jobs - queue.acknowledged > 2 * connections) {
    found.push(
      `${where}${queue.jobs - queue.acknowledged} jobs beyond the 2xx answers: more than the requests in flight`,
    );
  }
  return found;
}

async function main(): Promise<number> {
  const redis = await startRedisServer({ appendOnly: true }); // appendfsync everysec
  const replica = replicaAcks > 0 ? await startReplica(redis) : undefined;
  try {
    const redisPid = await serverPid(redis.url);
    const failures: string[] = [];
    const results: {
      bare: Measurement;
      receiver: Measurement;
      ratio: number;
      queue: QueueCheck;
      waited?: WaitedRound;
    }[] = [];
    // Both servers stay up for the whole run and are measured alternately, in short rounds, so
    // that each ratio compares two runs made under the same conditions of a shared machine.
    const bareServer = await spawnServer(
      ['bench/bare-route.ts'],
      {},
      (out) => /listening (\S+)/.exec(out)?.[1],
    );
    const receiverEnv = {
      H2H_API_SECRET: SECRET,
      REDIS_URL: redis.url,
      HOST: '127.0.0.1',
      PORT: '0',
      H2H_RECEIVER_METRICS_PORT: '0',
      LOG_LEVEL: 'info',
    };
    const listening = (out: string) =>
      /"msg":"receiver listening"/.test(out) ? /"url":"([^"]+)"/.exec(out)?.[1] : undefined;
    const receiverServer = await spawnServer(['src/cli/main.ts', 'receiver'], receiverEnv, listening);
    const waitingServer =
      replicaAcks > 0
        ? await spawnServer(
            ['src/cli/main.ts', 'receiver'],
            { ...receiverEnv, H2H_RECEIVER_REPLICA_ACKS: String(replicaAcks) },
            listening,
          )
        : undefined;
    const servers = [bareServer, receiverServer, ...(waitingServer ? [waitingServer] : [])];
    try {
      const warmupFailures = {
        bare: await warmUp(bareServer),
        receiver: await warmUp(receiverServer),
        ...(waitingServer ? { 'receiver with the replica wait': await warmUp(waitingServer) } : {}),
      };
      await flushRedis(redis.url); // the warm-up's jobs are not checked
      for (const [name, count] of Object.entries(warmupFailures)) {
        if (count > 0) failures.push(`warm-up of the ${name}: ${count} non-2xx, errors or timeouts`);
      }
      for (let n = 1; n <= rounds; n++) {
        const bare = await measure('bare Fastify route (204)', bareServer);
        const receiver = await measure('receiver (verify + enqueue)', receiverServer, redisPid);
        const queue = await checkQueue(redis.url, receiver.log);
        const ratio = receiver.requestsPerS / bare.requestsPerS;
        let waited: WaitedRound | undefined;
        if (waitingServer) {
          const waitsBefore = await commandCalls(redis.url, 'wait');
          const m = await measure(`receiver + WAIT ${replicaAcks}`, waitingServer, redisPid);
          const waits = (await commandCalls(redis.url, 'wait')) - waitsBefore;
          waited = {
            m,
            queue: await checkQueue(redis.url, m.log),
            ratio: m.requestsPerS / bare.requestsPerS,
            ofReceiver: m.requestsPerS / receiver.requestsPerS,
            perWait: m.result['2xx'] / Math.max(waits, 1),
          };
        }
        results.push({ bare, receiver, ratio, queue, ...(waited ? { waited } : {}) });
        const where = rounds > 1 ? `round ${n}: ` : '';
        failures.push(...runFailures(where, bare), ...runFailures(where, receiver, queue));
        if (waited) failures.push(...runFailures(where, waited.m, waited.queue));
        if (rounds > 1 || waited) {
          const ratios = waited
            ? `ratio ${ratio.toFixed(3)}, with the replica wait ${waited.ratio.toFixed(3)} (${waited.ofReceiver.toFixed(3)} of the receiver's; ${waited.perWait.toFixed(1)} webhooks per WAIT)`
            : `ratio ${ratio.toFixed(3)}`;
          const lines = [bare, receiver, ...(waited ? [waited.m] : [])].map((m) => `${where}${line(m)}\n`);
          process.stdout.write(`${lines.join('')}${where}${ratios}\n`);
        }
      }
    } finally {
      for (const server of servers) {
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
      rounds: results.map(({ bare, receiver, ratio: r, queue, waited }) => ({
        bare: figures(bare),
        receiver: figures(receiver),
        ratio: round(r, 3),
        ...(waited
          ? {
              receiver_with_replica_acks: figures(waited.m),
              ratio_with_replica_acks: round(waited.ratio, 3),
              webhooks_per_wait: round(waited.perWait, 1),
            }
          : {}),
        queue: {
          events_answered_2xx: queue.acknowledged,
          jobs_in_redis: queue.jobs,
          answered_2xx_missing_from_redis: queue.missing,
          jobs_of_requests_cut_in_flight: queue.jobs - queue.acknowledged + queue.missing,
        },
      })),
      ratio: round(ratio, 3),
      receiver_p99_ms: p99,
      ...(waitingServer
        ? { with_replica_acks: withReplicaAcks(results.flatMap((r) => (r.waited ? [r.waited] : []))) }
        : {}),
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
    await replica?.stop();
    await redis.stop();
  }
}

/** The medians of the receiver with the replica wait, beside the plain receiver's. */
function withReplicaAcks(waited: WaitedRound[]) {
  return {
    replicas: replicaAcks,
    ratio: round(median(waited.map((w) => w.ratio)), 3),
    of_receiver_requests_per_s: round(median(waited.map((w) => w.ofReceiver)), 3),
    receiver_p99_ms: median(waited.map((w) => w.m.result.latency.p99)),
    webhooks_per_wait: round(median(waited.map((w) => w.perWait)), 1),
  };
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
