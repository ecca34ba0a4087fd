import { createHash, randomBytes } from 'node:crypto';

/**
 * Invoice numbers `INV-YYYYMMDD-<run>-<seq>`: `<run>` is a random tag per simulator instance and
 * `<seq>` never restarts within it (not even on reset), so no two orders a client ever sees from
 * any simulator run share an invoice number.
 */
export class InvoiceNumbers {
  private readonly runTag = randomBytes(3).toString('hex').toUpperCase();
  private sequence = 0;

  next(now: Date): string {
    this.sequence += 1;
    const day = now.toISOString().slice(0, 10).replaceAll('-', '');
    return `INV-${day}-${this.runTag}-${String(this.sequence).padStart(6, '0')}`;
  }
}

/** The nickname the (simulated) validator resolves for a user id: `Player` + its last four characters. */
export function nicknameFor(userId: string): string {
  return `Player${userId.slice(-4)}`;
}

/** A deterministic serial number (voucher / provider transaction id) for an invoice. */
export function serialNumberFor(invoiceNumber: string): string {
  return `SN${createHash('sha256').update(invoiceNumber).digest('hex').slice(0, 16).toUpperCase()}`;
}

/**
 * The order's `target` (spec §2): `user_id(server_id)`, or `user_id` alone without a server id.
 * For products whose target has no `user_id`, the values of its keys joined by `|`.
 */
export function targetLabel(data: Readonly<Record<string, string>>, targetKeys: readonly string[]): string {
  const userId = data.user_id;
  if (userId === undefined) return targetKeys.map((key) => data[key] ?? '').join('|');
  const serverId = data.server_id;
  return serverId === undefined || serverId === '' ? userId : `${userId}(${serverId})`;
}
