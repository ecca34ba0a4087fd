import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { Notification, PublicOrder } from '../lib/index.js';
import { listeningOrigin } from '../shared/listening-origin.js';

/** What the demo's shop did with the notifications it was sent. */
export interface ShopNotificationCounts {
  /** Requests that reached the shop's notification URL. */
  received: number;
  /** Of those, verified by the `standardwebhooks` package (signature and timestamp). */
  verified: number;
  /** Of those, refused (401): the signature, timestamp or headers did not verify. */
  rejected: number;
  /** Verified deliveries whose `webhook-id` the shop had already handled (delivery is at least once). */
  duplicates: number;
  /** Verified notifications older (by `version`) than the order the shop already held: discarded. */
  outOfDate: number;
}

/** The demo's summary line of what the shop did with its notifications. */
export function shopNotificationsLine(n: ShopNotificationCounts): string {
  return (
    `shop: ${n.received} notifications received, ${n.verified} verified with standardwebhooks, ${n.rejected} rejected; ` +
    `${n.duplicates} duplicates and ${n.outOfDate} out of date (by version) discarded`
  );
}

/** The small shop of `h2h-sync demo`: a notification endpoint that keeps the latest version of each order. */
export interface DemoShop {
  /** The URL to register as the notification endpoint. */
  readonly url: string;
  /** The latest version of each order the shop was notified of, by partner_ref. */
  readonly orders: ReadonlyMap<string, PublicOrder>;
  readonly counts: Readonly<ShopNotificationCounts>;
  /** The endpoint's `whsec_` secret, given once the endpoint is registered; until then every delivery is refused. */
  trust(secret: string): void;
  /** Resolves at the next verified notification, or after `ms` at the latest. */
  nextNotification(ms: number): Promise<void>;
  close(): Promise<void>;
}

/** A notification is one order's public representation: a few KB at most. */
const MAX_BODY_BYTES = 1_000_000;

function readBody(request: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    request.on('end', () => resolve(size <= MAX_BODY_BYTES ? Buffer.concat(chunks) : undefined));
    request.on('error', reject);
  });
}

/**
 * Starts the demo's shop on 127.0.0.1 (a free port), written as a shop would write it with only
 * the public pieces: every notification is verified with the `standardwebhooks` package (the
 * reference implementation of the specification, not h2h-sync's own code) over the exact bytes
 * received, answered 204 once verified (401 when not), deduplicated on `webhook-id`, and an order
 * is replaced only by a higher `version` (deliveries run concurrently and may arrive out of order).
 */
export async function startDemoShop(): Promise<DemoShop> {
  const orders = new Map<string, PublicOrder>();
  const counts: ShopNotificationCounts = {
    received: 0,
    verified: 0,
    rejected: 0,
    duplicates: 0,
    outOfDate: 0,
  };
  const seen = new Set<string>();
  let webhook: Webhook | undefined;
  let waiters: Array<() => void> = [];

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const body = await readBody(request);
    counts.received += 1;
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(request.headers)) {
      if (typeof value === 'string') headers[name] = value;
    }
    let notification: Notification;
    try {
      if (!webhook) throw new WebhookVerificationError('no endpoint secret yet');
      if (!body) throw new WebhookVerificationError('body too large');
      notification = webhook.verify(body.toString('utf8'), headers) as Notification;
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error;
      counts.rejected += 1;
      response.writeHead(401).end();
      return;
    }
    counts.verified += 1;
    const id = headers['webhook-id']!;
    if (seen.has(id)) counts.duplicates += 1;
    else if (
      notification.type === 'product.price_changed' ||
      notification.type === 'balance.low' ||
      notification.type === 'balance.drift'
    ) {
      // Not an order's: the demo's shop follows its orders only.
      seen.add(id);
    } else {
      seen.add(id);
      const order = notification.data;
      const held = orders.get(order.partner_ref);
      if (held && held.version >= order.version) counts.outOfDate += 1;
      else orders.set(order.partner_ref, order);
    }
    response.writeHead(204).end();
    const woken = waiters;
    waiters = [];
    for (const wake of woken) wake();
  };

  const server = createServer((request, response) => {
    if (request.method !== 'POST' || request.url !== '/notifications') {
      response.writeHead(404).end();
      return;
    }
    handle(request, response).catch(() => {
      if (!response.headersSent) response.writeHead(500);
      response.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });

  return {
    url: `${listeningOrigin(server)}/notifications`,
    orders,
    counts,
    trust(secret) {
      webhook = new Webhook(secret);
    },
    nextNotification(ms) {
      return new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // The notifier's keep-alive connections would hold close() open.
      server.closeAllConnections();
      await closed;
    },
  };
}
