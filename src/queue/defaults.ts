/**
 * The webhook producer's defaults, in a module that imports nothing: the config schema names them
 * without loading BullMQ and ioredis.
 */

/** Default of `WebhookProducerOptions.enqueueTimeoutMs`. */
export const DEFAULT_ENQUEUE_TIMEOUT_MS = 2_000;
