/**
 * The receiver's defaults, in a module that imports nothing: the config schema names them without
 * loading the receiver's server (fastify) and its queue (BullMQ).
 */

/** Default of `ReceiverAppOptions.path`. */
export const DEFAULT_WEBHOOK_PATH = '/webhooks/h2h';
/** Default of `ReceiverAppOptions.bodyLimit`: 256 KiB. */
export const DEFAULT_WEBHOOK_BODY_LIMIT = 256 * 1024;

/**
 * Defaults of `ReceiverAppOptions.limits`, sized for an upstream that gives up on a
 * delivery after 10 s (decisions.md): a real delivery (a few KB) arrives in milliseconds, so
 * anything slower is a broken or hostile client, and each such connection pins up to the body
 * limit of memory until it is cut off.
 */
export const DEFAULT_RECEIVER_LIMITS = {
  /** Whole request, headers and body (Node's `requestTimeout`): 408 and closed past it. */
  requestTimeoutMs: 10_000,
  /** Headers alone (Node's `headersTimeout`); at most `requestTimeoutMs`. */
  headersTimeoutMs: 5_000,
  /** A connection with nothing arriving (the socket time-out, Fastify's `connectionTimeout`). */
  idleTimeoutMs: 10_000,
  /** An idle keep-alive connection after an answer. */
  keepAliveTimeoutMs: 5_000,
  /** Connections held at once; Node closes further ones on arrival. */
  maxConnections: 1_024,
} as const;

/**
 * Default port of the receiver's metrics listener. Under pm2 cluster mode each instance adds
 * its `NODE_APP_INSTANCE` (`receiverMetricsPort` in metrics-server.ts), so a scrape of every port
 * counts every instance: a scrape of the shared webhook port would reach one at random.
 */
export const DEFAULT_RECEIVER_METRICS_PORT = 9_464;
