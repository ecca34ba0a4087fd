import { Queue, QueueEvents } from 'bullmq';
import { DEFAULT_QUEUE_PREFIX, WEBHOOK_QUEUE, type WebhookJobData } from '../../queue/webhook-queue.js';
import { connectRedis } from '../../shared/redis-connection.js';
import type { OrderEvent } from '../../store/local-order.js';
import { redactUrl } from '../../store/store-url.js';
import { openContext } from '../context.js';
import { runAction } from '../output.js';
import { toPublicJson } from '../public-json.js';

/** How often the store is read for newly applied events. */
const STORE_POLL_MS = 250;

/** One line of `h2h-sync tail`; `--json` prints it in the public form (`event_id`). */
export interface TailLine {
  /** ISO 8601: when the webhook was queued, or when the event was applied. */
  time: string;
  /** `received`: a verified webhook queued by a receiver; `applied`: an event the store applied. */
  kind: 'received' | 'applied';
  /** `webhook`, `poll`, `create` or `manual`. */
  source: string;
  /** The webhook's event id (its job id for a received one), or null. */
  eventId: string | null;
  /** The order's partner_ref (or invoice number, for a received webhook that names only that). */
  ref: string | null;
  /** The status the event carries. */
  status: string | null;
  /** For an applied event: whether it changed the order, and why (or why not). */
  changed?: boolean;
  reason?: string;
}

function appliedLine(event: OrderEvent): TailLine {
  return {
    time: new Date(event.appliedAt).toISOString(),
    kind: 'applied',
    source: event.source,
    eventId: event.eventId,
    ref: event.partnerRef,
    status: event.status,
    changed: event.changed,
    reason: event.reason,
  };
}

/**
 * A queued webhook job: its name is `<ref> <STATUS>` (or `unparsed`); its data holds the event id
 * of the signed body and when the receiver got it. `data` is undefined when the job is already gone.
 */
function receivedLine(name: string, data: WebhookJobData | undefined): TailLine {
  const [ref = null, status = null] = name === 'unparsed' ? [] : name.split(' ');
  return {
    time: new Date(data?.receivedAt ?? Date.now()).toISOString(),
    kind: 'received',
    source: 'webhook',
    eventId: data?.eventId ?? data?.headerEventId ?? null,
    ref,
    status,
  };
}

/** A line for a person: time, what, event id, order, status change. */
function humanLine(line: TailLine): string {
  const what = line.kind === 'received' ? 'received' : line.changed ? 'applied ' : 'no change';
  const status =
    line.kind === 'received' ? (line.status ?? '?') : `→ ${line.status ?? '-'} (${line.reason ?? ''})`;
  return [
    line.time,
    line.source.padEnd(7),
    what.padEnd(9),
    (line.eventId ?? '-').padEnd(24),
    line.ref ?? '-',
    status,
  ].join('  ');
}

/** `tail`: follows webhooks received and events applied, one line each, until Ctrl-C. */
export const tail = (flags: { json?: boolean }) =>
  runAction(Boolean(flags.json), async () => {
    const json = Boolean(flags.json);
    const context = await openContext({ store: 'existing' });
    const queries = context.store!.queries;
    const redis = await connectRedis(context.config.redisUrl, {
      what: 'the webhook queue lives there',
      reconnect: true,
    });
    const queue = new Queue<WebhookJobData>(WEBHOOK_QUEUE, {
      connection: redis,
      prefix: DEFAULT_QUEUE_PREFIX,
    });
    queue.on('error', () => {});
    // Start reading queue events right after the last one written now ('$' would miss those
    // added before the first blocking read), so nothing queued after the line below is lost.
    const [last] = await redis.xrevrange(queue.keys.events!, '+', '-', 'COUNT', 1);
    const queueEvents = new QueueEvents(WEBHOOK_QUEUE, {
      connection: redis.duplicate({ maxRetriesPerRequest: null }),
      prefix: DEFAULT_QUEUE_PREFIX,
      lastEventId: last?.[0] ?? '0-0',
    });
    queueEvents.on('error', () => {}); // a Redis outage: the store part goes on; it reconnects
    let lines = 0;
    const print = (line: TailLine) => {
      lines += 1;
      process.stdout.write(`${json ? JSON.stringify(toPublicJson(line)) : humanLine(line)}\n`);
    };
    // One job read at a time, so received lines come out in the order the jobs were added.
    let received = Promise.resolve();
    queueEvents.on('added', ({ jobId, name }) => {
      received = received.then(async () => {
        const job = await queue.getJob(jobId).catch(() => undefined);
        print(receivedLine(name, job?.data));
      });
    });

    let after = await queries.lastEventId();
    let reading = false;
    const follow = setInterval(() => {
      if (reading) return;
      reading = true;
      void (async () => {
        for (;;) {
          const events = await queries.eventsAfter(after);
          for (const event of events) print(appliedLine(event));
          if (events.length === 0) break;
          after = events[events.length - 1]!.id;
        }
      })().finally(() => {
        reading = false;
      });
    }, STORE_POLL_MS);
    process.stderr.write(
      `following webhooks on ${WEBHOOK_QUEUE} and events applied to ${redactUrl(context.config.dbUrl)}; Ctrl-C to stop\n`,
    );

    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    clearInterval(follow);
    await queueEvents.close().catch(() => {});
    await received;
    await queue.close().catch(() => {});
    redis.disconnect();
    await context.close();
    process.stderr.write(`${lines} line${lines === 1 ? '' : 's'}\n`);
  });
