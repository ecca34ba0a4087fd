/**
 * Reading a webhook body: the receiver uses it to find the order of a stale but authentic event,
 * the worker to find the order snapshot to apply. One rule for both (decisions.md, "Webhooks"):
 * the order is under `data`, under `order`, or the body itself.
 */

/** Where in the body the order was found. */
export type WebhookOrderLocation = 'data' | 'order' | 'top-level';

/** An order found in a webhook body. Only the references are checked; the rest is as sent. */
export interface WebhookOrder {
  location: WebhookOrderLocation;
  /** The order object as sent. */
  order: Record<string, unknown>;
  /** `partner_ref` when it is a non-empty string, else null. */
  partnerRef: string | null;
  /** `invoice_number` when it is a non-empty string, else null. */
  invoiceNumber: string | null;
}

/** The outcome of {@link parseWebhookBody}. */
export type ParsedWebhookBody = { ok: true; body: unknown } | { ok: false; reason: string };

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function nonEmptyString(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

/** Parses raw webhook bytes as UTF-8 JSON; never throws. */
export function parseWebhookBody(rawBody: Buffer | string): ParsedWebhookBody {
  try {
    return { ok: true, body: JSON.parse(typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8')) };
  } catch (error) {
    return { ok: false, reason: `the body is not JSON: ${(error as Error).message}` };
  }
}

/**
 * Finds the order in a parsed webhook body: the first of `body.data`, `body.order` and `body`
 * that is an object with a non-empty string `partner_ref` or `invoice_number`. Null when none
 * is: the event holds no recognisable order.
 */
export function findOrderInWebhook(body: unknown): WebhookOrder | null {
  if (!isPlainObject(body)) return null;
  const candidates: [WebhookOrderLocation, unknown][] = [
    ['data', body.data],
    ['order', body.order],
    ['top-level', body],
  ];
  for (const [location, candidate] of candidates) {
    if (!isPlainObject(candidate)) continue;
    const partnerRef = nonEmptyString(candidate.partner_ref);
    const invoiceNumber = nonEmptyString(candidate.invoice_number);
    if (partnerRef || invoiceNumber) return { location, order: candidate, partnerRef, invoiceNumber };
  }
  return null;
}
