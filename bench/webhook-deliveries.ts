import { randomBytes } from 'node:crypto';
import { signWebhook } from '../src/upstream/signature.js';
import type { AutocannonRequest } from './autocannon.js';

/** The webhook secret of the receiver the bench starts. */
export const SECRET = 'bench_secret_receiver';

/** What autocannon keeps per connection between a request and its answer. */
interface DeliveryContext {
  eventId?: string;
}

/** Unique, validly signed deliveries, and which of them were answered 2xx. */
export class DeliveryLog {
  readonly sent = new Set<string>();
  /**
   * Every event any log of this run sent: a request cut in flight at the end of a run (a
   * warm-up too) may be queued after the next run began.
   */
  static readonly everSent = new Set<string>();
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
    DeliveryLog.everSent.add(eventId);
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
