/**
 * The queue's defaults (the webhook producer's, the private Redis's port), in a module that
 * imports nothing: the config schema names them without loading BullMQ and ioredis.
 */

/** Default of `WebhookProducerOptions.enqueueTimeoutMs`. */
export const DEFAULT_ENQUEUE_TIMEOUT_MS = 2_000;

/**
 * Default of `WebhookProducerOptions.replicaAckTimeoutMs`: the longest `WAIT` for replicas to
 * acknowledge a queued webhook, when the receiver waits for them at all. A replica on the same
 * network acknowledges within milliseconds; twice this stays below the enqueue timeout's 2 s.
 */
export const DEFAULT_REPLICA_ACK_TIMEOUT_MS = 500;

/**
 * Port of the deployment's private Redis: the one pm2's ecosystem runs when REDIS_URL is not set
 * (H2H_PRIVATE_REDIS_PORT), off Redis's standard 6379 so it never meets a system Redis.
 */
export const DEFAULT_PRIVATE_REDIS_PORT = 6380;
