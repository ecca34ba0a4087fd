import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { TestContext } from 'node:test';
import type { Database } from 'better-sqlite3';
import { createWebhookProducer, type WebhookProducer } from '../../src/queue/webhook-producer.js';
import type { OpenedStore } from '../../src/store/open-store.js';
import { openSqliteConnection } from '../../src/store/sqlite/sqlite-db.js';
import type { Order } from '../../src/upstream/model.js';
import {
  createEventWorker,
  type EventWorker,
  type EventWorkerOptions,
} from '../../src/worker/event-worker.js';
import { BUILT_CLI } from './cli.js';
import { nextMessage, openTestStore, scheduleSettings, snapshot } from './store.js';

/**
 * Harness of the worker tests: webhooks are queued through the receiver's own producer (so the
 * jobs are exactly what the receiver queues), and the worker runs on a real SQLite file.
 */

/**
 * A cleanup scope for one test: hooks registered on it run last-registered first, in one
 * `t.after` of the test. Pass it wherever a helper takes `t` for its cleanup, so that the worker
 * closes before the Redis it talks to stops (plain `t.after` hooks run first-registered first,
 * and a BullMQ worker whose Redis is gone waits out its close timeout).
 */
export function cleanupScope(t: Pick<TestContext, 'after'>): Pick<TestContext, 'after'> {
  const hooks: Array<() => unknown> = [];
  t.after(async () => {
    const errors: unknown[] = [];
    for (const hook of hooks.reverse()) {
      try {
        await hook();
      } catch (error) {
        errors.push(error);
      }
    }
    if (errors.length > 0) throw errors[0];
  });
  return {
    after(fn) {
      hooks.push(fn as () => unknown);
    },
  };
}

/** A webhook body as decisions.md and the simulator shape it: the order under `data`. */
export function webhookBodyOf(order: Partial<Order> | Record<string, unknown>, eventId: string): Buffer {
  return Buffer.from(
    JSON.stringify({
      event_id: eventId,
      event: 'order.updated',
      created_at: new Date().toISOString(),
      data: order,
    }),
  );
}

/** A new event id. */
export const newEventId = (): string => `evt_${randomUUID()}`;

/** The receiver's producer on `redisUrl`, closed when the test ends. */
export async function testProducer(
  t: Pick<TestContext, 'after'>,
  redisUrl: string,
): Promise<WebhookProducer> {
  const producer = createWebhookProducer({ redisUrl, enqueueTimeoutMs: 10_000 });
  t.after(() => producer.close());
  await producer.ping();
  return producer;
}

/** Queues one delivery as the receiver would after verifying it; returns its job id. */
export async function queueWebhook(
  producer: WebhookProducer,
  rawBody: Buffer | string,
  eventId: string | null = newEventId(),
): Promise<string> {
  const { jobId } = await producer.enqueueWebhook({
    rawBody: Buffer.isBuffer(rawBody) ? rawBody : Buffer.from(rawBody),
    headerEventId: eventId,
    timestamp: Math.floor(Date.now() / 1000),
    eventType: 'order.updated',
  });
  return jobId;
}

/** Queues an order snapshot as one webhook event; returns the event id. */
export async function queueSnapshot(
  producer: WebhookProducer,
  order: Partial<Order>,
  eventId: string = newEventId(),
): Promise<string> {
  await queueWebhook(producer, webhookBodyOf(order, eventId), eventId);
  return eventId;
}

export interface TestWorker {
  eventWorker: EventWorker;
  store: OpenedStore;
  /** A connection of its own to the store's file, to read what is committed (another process's view). */
  db: Database;
}

/**
 * An event worker on its own connection to the SQLite file at `dbPath`, closed (and the
 * connection with it) when the test ends. Options default to the production defaults.
 */
export async function startTestWorker(
  t: Pick<TestContext, 'after'>,
  options: { redisUrl: string; dbPath: string; busyTimeoutMs?: number } & Partial<
    Omit<EventWorkerOptions, 'store' | 'db' | 'redisUrl'>
  >,
): Promise<TestWorker> {
  const { dbPath, busyTimeoutMs, ...workerOptions } = options;
  const store = await openTestStore(
    dbPath,
    scheduleSettings(),
    busyTimeoutMs === undefined ? {} : { lockTimeoutMs: busyTimeoutMs },
  );
  const eventWorker = createEventWorker({ writer: store.writer, ...workerOptions });
  const db = openSqliteConnection({ path: dbPath });
  t.after(async () => {
    await eventWorker.close({ timeoutMs: 5_000 });
    await store.close();
    db.close();
  });
  await eventWorker.waitUntilReady();
  return { eventWorker, store, db };
}

/** Job counts of the webhook queue by state. */
export async function webhookJobCounts(producer: WebhookProducer): Promise<Record<string, number>> {
  return producer.webhookQueue.getJobCounts(
    'waiting',
    'active',
    'delayed',
    'completed',
    'failed',
    'prioritized',
  );
}

/** True when nothing is left to process: no job waiting, active, delayed or prioritized. */
export async function queueSettled(producer: WebhookProducer): Promise<boolean> {
  const counts = await webhookJobCounts(producer);
  return counts.waiting === 0 && counts.active === 0 && counts.delayed === 0 && counts.prioritized === 0;
}

/** Queues one settled SUCCESS event for each of `n` new orders, through the receiver's producer. */
export async function queueBacklog(producer: WebhookProducer, n: number, prefix: string): Promise<void> {
  for (let start = 0; start < n; start += 500) {
    await Promise.all(
      Array.from({ length: Math.min(500, n - start) }, (_, i) => {
        const ref = `${prefix}-${start + i}`;
        const eventId = `evt_${ref}`;
        return queueWebhook(
          producer,
          webhookBodyOf(snapshot(ref, 'SUCCESS', { serial_number: `SN-${ref}` }), eventId),
          eventId,
        );
      }),
    );
  }
}

/**
 * Starts `h2h-sync <command>` (worker, receiver, api) as pm2 would, with exactly `env`, in `cwd`
 * (default: this one), and waits for its `ready` message; killed when the test ends.
 */
export async function spawnReady(
  t: Pick<TestContext, 'after'>,
  command: string,
  { env, cwd }: { env: NodeJS.ProcessEnv; cwd?: string },
): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(process.execPath, [BUILT_CLI, command], {
    env,
    ...(cwd === undefined ? {} : { cwd }),
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const ready = await nextMessage<string>(child).catch((error: Error) => {
    throw new Error(`${command}${cwd ? ` in ${cwd}` : ''}: ${error.message}\n${output}`);
  });
  assert.equal(ready, 'ready');
  return { child, output: () => output };
}

/** Starts `h2h-sync worker` as a user (or pm2) would, and waits for its `ready` message. */
export function spawnWorker(
  t: Pick<TestContext, 'after'>,
  env: Record<string, string>,
): Promise<{ child: ChildProcess; output: () => string }> {
  return spawnReady(t, 'worker', {
    env: { ...process.env, LOG_LEVEL: 'info', RECONCILE_ENABLED: 'false', ...env },
  });
}

/** The JSON log lines of a process's `output` (other lines, such as warnings, are left out). */
export function logLines(output: string): Array<Record<string, unknown>> {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Events applied so far, read through another connection to the file. */
export const appliedEvents = (db: Database): number =>
  (db.prepare('SELECT COUNT(*) AS n FROM order_events').get() as { n: number }).n;
