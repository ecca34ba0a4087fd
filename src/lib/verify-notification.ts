import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { FeedEventData, FeedEventType, PreviousStatus } from '../store/feed.js';

/**
 * A notification's body (docs/api.md, "Notifications"): one change of one order (`data` the
 * order's whole public representation after it, with its `version`; `previous_status` its
 * status before), a product's price change, or a low balance; `type` tells which.
 */
export type Notification = {
  [T in FeedEventType]: {
    type: T;
    /** When the change was committed, ISO 8601 UTC. */
    timestamp: string;
    data: FeedEventData[T];
  } & PreviousStatus<T>;
}[FeedEventType];

/** The headers of a notification as a Node server gets them (any case, arrays allowed). */
export type NotificationRequestHeaders = Record<string, string | string[] | undefined>;

/** A notification whose signature, timestamp or headers do not verify: answer it 400 or 401. */
export class NotificationVerificationError extends Error {
  override name = 'NotificationVerificationError';
}

const HEADER_NAMES = ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const;

/**
 * Verifies a notification of h2h-sync with the reference implementation of the Standard Webhooks
 * specification (the `standardwebhooks` package): the signature over the exact bytes received,
 * and a timestamp within 5 minutes. `secrets` is the endpoint's `whsec_` secret, or during a
 * rotation both (either verifies). Returns the parsed body; throws
 * {@link NotificationVerificationError}. Deduplicate on `webhook-id` (delivery is at least once)
 * and keep the highest `data.version` of each order.
 */
export function verifyNotification(
  secrets: string | readonly string[],
  rawBody: string | Buffer,
  headers: NotificationRequestHeaders,
): Notification {
  const wanted: Record<string, string> = {};
  for (const name of HEADER_NAMES) {
    const value = Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1];
    const text = Array.isArray(value) ? value[0] : value;
    if (!text) throw new NotificationVerificationError(`the ${name} header is missing`);
    wanted[name] = text;
  }
  let last: unknown;
  for (const secret of typeof secrets === 'string' ? [secrets] : secrets) {
    try {
      return new Webhook(secret).verify(rawBody, wanted) as Notification;
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error;
      last = error;
    }
  }
  throw new NotificationVerificationError(
    `the notification does not verify: ${(last as Error | undefined)?.message ?? 'no secret given'}`,
  );
}
