import { z } from 'zod';
import { ConfigError } from '../config/config-error.js';
import { header, int, LOOPBACK, list, type SharedSettings } from '../config/variables.js';
import { DEFAULT_ENQUEUE_TIMEOUT_MS, DEFAULT_REPLICA_ACK_TIMEOUT_MS } from '../queue/defaults.js';
import { isDefaultUpstream, WEBHOOK_HEADERS } from '../upstream/model.js';
import { DEFAULT_TOLERANCE_S } from '../upstream/signature.js';
import type { UpstreamAccount } from '../upstream/upstreams.js';
import type { ReceiverUpstream } from './app.js';
import {
  DEFAULT_RECEIVER_LIMITS,
  DEFAULT_RECEIVER_METRICS_PORT,
  DEFAULT_WEBHOOK_BODY_LIMIT,
  DEFAULT_WEBHOOK_PATH,
} from './defaults.js';

/** The webhook receiver's variables (README, "Settings"). */
export const receiverVariables = z.object({
  H2H_API_SECRET: list
    .optional()
    .describe(
      'Webhook secrets, comma-separated, newest first (two during a rotation). Required by the receiver.',
    ),
  HOST: z.string().min(1).default(LOOPBACK).describe('Address the webhook receiver listens on.'),
  PORT: int(0).max(65_535).default(3000).describe('Port the webhook receiver listens on; `0` = a free one.'),
  H2H_WEBHOOK_PATH: z
    .string()
    .regex(/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/, 'must be a URL path starting with /')
    .default(DEFAULT_WEBHOOK_PATH)
    .describe('Path the receiver accepts webhooks on (`POST`).'),
  H2H_WEBHOOK_TOLERANCE_S: int(1)
    .default(DEFAULT_TOLERANCE_S)
    .describe('Seconds a webhook timestamp may be from this clock, either way, before it is refused.'),
  H2H_WEBHOOK_BODY_LIMIT: int(1)
    .default(DEFAULT_WEBHOOK_BODY_LIMIT)
    .describe('Largest webhook body the receiver accepts, in bytes; larger is 413.'),
  H2H_RECEIVER_REQUEST_TIMEOUT_MS: int(1)
    .default(DEFAULT_RECEIVER_LIMITS.requestTimeoutMs)
    .describe(
      'Longest time the receiver waits for a whole webhook request, headers and body; a slower one is answered 408 and closed. The upstream itself gives up after 10 s.',
    ),
  H2H_RECEIVER_HEADERS_TIMEOUT_MS: int(1)
    .default(DEFAULT_RECEIVER_LIMITS.headersTimeoutMs)
    .describe(
      'Longest time the receiver waits for the headers of a request; at most H2H_RECEIVER_REQUEST_TIMEOUT_MS.',
    ),
  H2H_RECEIVER_IDLE_TIMEOUT_MS: int(1)
    .default(DEFAULT_RECEIVER_LIMITS.idleTimeoutMs)
    .describe('A receiver connection on which nothing arrives for this long is closed.'),
  H2H_RECEIVER_KEEP_ALIVE_TIMEOUT_MS: int(1)
    .default(DEFAULT_RECEIVER_LIMITS.keepAliveTimeoutMs)
    .describe('How long the receiver keeps an idle keep-alive connection open after an answer.'),
  H2H_RECEIVER_MAX_CONNECTIONS: int(1)
    .default(DEFAULT_RECEIVER_LIMITS.maxConnections)
    .describe(
      'Most connections one receiver process holds open; further ones are closed at once (the sender retries).',
    ),
  H2H_RECEIVER_METRICS_HOST: z
    .string()
    .min(1)
    .default(LOOPBACK)
    .describe(
      "Address of the receiver's own metrics listener (`GET /metrics`), apart from the internet-facing webhook port.",
    ),
  H2H_RECEIVER_METRICS_PORT: int(0)
    .max(65_535)
    .default(DEFAULT_RECEIVER_METRICS_PORT)
    .describe(
      "Port of the receiver's metrics listener; under pm2 instance N listens on this port + N (`NODE_APP_INSTANCE`), so each is scraped. `0` = none.",
    ),
  H2H_TIMESTAMP_HEADER: header
    .default(WEBHOOK_HEADERS.timestamp)
    .describe('Webhook header carrying the signed timestamp.'),
  H2H_SIGNATURE_HEADER: header
    .default(WEBHOOK_HEADERS.signature)
    .describe('Webhook header carrying the signature.'),
  H2H_EVENT_ID_HEADER: header
    .default(WEBHOOK_HEADERS.eventId)
    .describe('Webhook header carrying the event id the receiver dedupes on.'),
  H2H_EVENT_TYPE_HEADER: header
    .default(WEBHOOK_HEADERS.eventType)
    .describe('Webhook header carrying the event type.'),
  H2H_ENQUEUE_TIMEOUT_MS: int(1)
    .default(DEFAULT_ENQUEUE_TIMEOUT_MS)
    .describe('Longest wait for Redis to acknowledge a queued webhook before the receiver answers 503.'),
  H2H_RECEIVER_REPLICA_ACKS: int(0)
    .default(0)
    .describe(
      'Replicas that must hold a queued webhook before the receiver answers 2xx (Redis `WAIT`); fewer within H2H_RECEIVER_REPLICA_ACK_TIMEOUT_MS is 503 and the upstream retries. `0` = answer once the primary has it, which a failover right after can lose (docs/deployment.md, "Redis with Sentinel").',
    ),
  H2H_RECEIVER_REPLICA_ACK_TIMEOUT_MS: int(1)
    .default(DEFAULT_REPLICA_ACK_TIMEOUT_MS)
    .describe(
      'Longest wait for H2H_RECEIVER_REPLICA_ACKS replicas to acknowledge a queued webhook; twice it below H2H_ENQUEUE_TIMEOUT_MS (a webhook queued while a WAIT is out waits for it, then for its own).',
    ),
  H2H_RECEIVER_INSTANCES: int(1)
    .default(2)
    .describe('pm2 only (`ecosystem.config.js`): receiver processes in cluster mode, sharing `PORT`.'),
});

/**
 * Every upstream's name and webhook secrets, newest first (docs/upstreams.md); throws
 * {@link ConfigError} naming the variable of an upstream that has none.
 */
export function webhookUpstreams(config: { upstreams: readonly UpstreamAccount[] }): ReceiverUpstream[] {
  return config.upstreams.map(({ name, secrets, variables }) => {
    if (secrets.length === 0) {
      const whose = isDefaultUpstream(name) ? '' : ` of upstream "${name}"`;
      throw new ConfigError(
        `${variables.secret} must be set (comma-separated, newest first) to verify the webhooks${whose}`,
      );
    }
    return { name, secrets };
  });
}

/** The webhook receiver's section (docs/receiver.md); throws {@link ConfigError} when no webhook secret is configured. */
export function receiverSettings(
  config: Pick<SharedSettings, 'redisUrl' | 'logLevel' | 'logFormat'> & {
    settings: z.output<typeof receiverVariables> & { H2H_SHUTDOWN_TIMEOUT_MS: number };
    upstreams: readonly UpstreamAccount[];
  },
) {
  const s = config.settings;
  return {
    host: s.HOST,
    port: s.PORT,
    path: s.H2H_WEBHOOK_PATH,
    upstreams: webhookUpstreams(config),
    toleranceS: s.H2H_WEBHOOK_TOLERANCE_S,
    bodyLimit: s.H2H_WEBHOOK_BODY_LIMIT,
    headers: {
      timestamp: s.H2H_TIMESTAMP_HEADER,
      signature: s.H2H_SIGNATURE_HEADER,
      eventId: s.H2H_EVENT_ID_HEADER,
      eventType: s.H2H_EVENT_TYPE_HEADER,
    },
    timeouts: {
      requestMs: s.H2H_RECEIVER_REQUEST_TIMEOUT_MS,
      headersMs: s.H2H_RECEIVER_HEADERS_TIMEOUT_MS,
      idleMs: s.H2H_RECEIVER_IDLE_TIMEOUT_MS,
      keepAliveMs: s.H2H_RECEIVER_KEEP_ALIVE_TIMEOUT_MS,
    },
    maxConnections: s.H2H_RECEIVER_MAX_CONNECTIONS,
    metrics: { host: s.H2H_RECEIVER_METRICS_HOST, port: s.H2H_RECEIVER_METRICS_PORT },
    enqueueTimeoutMs: s.H2H_ENQUEUE_TIMEOUT_MS,
    replicaAcks: s.H2H_RECEIVER_REPLICA_ACKS,
    replicaAckTimeoutMs: s.H2H_RECEIVER_REPLICA_ACK_TIMEOUT_MS,
    shutdownTimeoutMs: s.H2H_SHUTDOWN_TIMEOUT_MS,
    redisUrl: config.redisUrl,
    logLevel: config.logLevel,
    logFormat: config.logFormat,
  };
}
export type ReceiverSettings = ReturnType<typeof receiverSettings>;
