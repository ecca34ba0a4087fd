import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

/**
 * The signature of our notifications, per the Standard Webhooks specification
 * (standardwebhooks.com; decisions.md, "Notifications to the reseller's shop"): HMAC-SHA256,
 * keyed with the bytes of the endpoint's secret, over `webhook-id + "." + webhook-timestamp +
 * "." + body`, base64, as `v1,<signature>`; several space-separated during a secret rotation.
 * Signed by the `standardwebhooks` package, which a shop (or any Svix library) verifies with.
 */

/** The prefix of an endpoint secret; the rest is the base64 of the key bytes. */
export const SECRET_PREFIX = 'whsec_';

/** Key bytes of a new secret (the specification allows 24 to 64). */
const SECRET_BYTES = 32;

/** A new endpoint secret: `whsec_` + base64 of 32 random bytes. */
export function generateEndpointSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** The headers that identify and sign one notification. */
export interface NotificationHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * Signs `body` (the exact bytes sent) with every secret in `secrets` (the current one first) and
 * returns the three Standard Webhooks headers. `timestampS` is unix seconds.
 */
export function signNotification(
  secrets: readonly string[],
  id: string,
  timestampS: number,
  body: string,
): NotificationHeaders {
  if (secrets.length === 0) throw new RangeError('at least one secret is needed to sign a notification');
  const at = new Date(timestampS * 1000);
  const signatures = secrets.map((secret) => new Webhook(secret).sign(id, at, body));
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampS),
    'webhook-signature': signatures.join(' '),
  };
}
