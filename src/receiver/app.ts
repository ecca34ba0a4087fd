import { performance } from 'node:perf_hooks';
import Fastify, {
  errorCodes,
  type FastifyBaseLogger,
  type FastifyContentTypeParser,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import fastifyRawBody from 'fastify-raw-body';
import type { Logger } from 'pino';
import { findOrderInWebhook, parseWebhookBody } from '../queue/webhook-order.js';
import { QueueUnavailableError, type WebhookProducer } from '../queue/webhook-producer.js';
import { type ClientErrorKind, jsonClientErrorHandler } from '../shared/client-error.js';
import { type RequestErrorKind, requestErrorOf } from '../shared/request-errors.js';
import { isDefaultUpstream, WEBHOOK_HEADERS } from '../upstream/model.js';
import { DEFAULT_TOLERANCE_S, verifyWebhookSignature } from '../upstream/signature.js';
import { DEFAULT_RECEIVER_LIMITS, DEFAULT_WEBHOOK_BODY_LIMIT, DEFAULT_WEBHOOK_PATH } from './defaults.js';
import { type ReceiverErrorCode, ReceiverHttpError, receiverErrorBody } from './errors.js';
import { createReceiverMetrics, type ReceiverMetrics, type WebhookOutcome } from './metrics.js';

export type ReceiverLimits = { [K in keyof typeof DEFAULT_RECEIVER_LIMITS]: number };

/** Header names the receiver reads, in lower case. */
export interface WebhookHeaderNames {
  timestamp: string;
  signature: string;
  eventId: string;
  eventType: string;
}

/** An upstream whose webhooks the receiver takes, and the secrets they are signed with. */
export interface ReceiverUpstream {
  name: string;
  /** Accepted webhook secrets, newest first (more than one during a rotation). */
  secrets: readonly string[];
}

export interface ReceiverAppOptions {
  /**
   * The upstreams whose webhooks are taken (docs/upstreams.md, "Webhooks"): the default one's at
   * `path`, every other's at `path/<name>`, each verified with its own secrets. Required.
   */
  upstreams: readonly ReceiverUpstream[];
  /** Where verified webhooks and early-poll requests go. The app does not close it. */
  producer: WebhookProducer;
  /** Default: {@link DEFAULT_WEBHOOK_PATH}. */
  path?: string;
  /** Tolerated clock distance, either way, in seconds. Default: {@link DEFAULT_TOLERANCE_S}. */
  toleranceS?: number;
  /** Largest accepted body in bytes. Default: {@link DEFAULT_WEBHOOK_BODY_LIMIT}. */
  bodyLimit?: number;
  /** Default: `x-timestamp`, `x-signature`, `x-event-id`, `x-event-type` (decisions.md). */
  headers?: Partial<WebhookHeaderNames>;
  /** Time-outs and the connection cap. Default: {@link DEFAULT_RECEIVER_LIMITS}. */
  limits?: Partial<ReceiverLimits>;
  /** Where the app counts requests. Default: new metrics (served by the caller, never by this app). */
  metrics?: ReceiverMetrics;
  /** Default: no logging. */
  logger?: Logger;
}

/** The 200 answers, serialised once. */
const ACCEPTED_BODY = JSON.stringify({ received: true, duplicate: false });
const DUPLICATE_BODY = JSON.stringify({ received: true, duplicate: true });

/**
 * Content types the receiver takes as JSON, with or without parameters such as a charset;
 * anything else is 415 before the body is read. Fastify matches a string parser on the media
 * type alone but a RegExp on the whole header value, parameters included.
 */
const JSON_CONTENT_TYPES: (string | RegExp)[] = [
  'application/json',
  /^application\/[a-z0-9!#$&^_.+-]+\+json\s*(;.*)?$/i,
];

function headerValue(value: string | string[] | undefined): string | undefined {
  const first = Array.isArray(value) ? value[0] : value;
  return first === '' ? undefined : first;
}

/**
 * The parser of the JSON content types. fastify-raw-body (registered with `runFirst`) already
 * buffers the request stream into `request.rawBody` from the preParsing stage on, so this parser
 * buffers nothing: it enforces the body limit as the bytes pass and, at the end of the stream,
 * hands on the bytes fastify-raw-body collected (its listeners, added first, have run by then).
 * The body is thus read into memory once. It never fails on the content: an authentic body that
 * is not JSON must still reach the route and be queued (the worker parks it).
 */
function rawBodyHandOver(bodyLimit: number): FastifyContentTypeParser {
  return (request, payload, done) => {
    if (payload.readableEnded) return done(null, request.rawBody);
    if (Number(request.headers['content-length']) > bodyLimit) {
      return done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE(), undefined);
    }
    let received = 0;
    const finish = (error: (Error & { statusCode?: number }) | null) => {
      payload.off('data', onData);
      payload.off('end', onEnd);
      payload.off('error', onError);
      payload.off('close', onClose);
      if (error) done(error, undefined);
      else done(null, request.rawBody);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      // fastify-raw-body stops reading here too, and leaves rawBody unset.
      if (received > bodyLimit) finish(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    };
    const onEnd = () => finish(null);
    const onError = (error: Error & { statusCode?: number }) => {
      error.statusCode ??= 400;
      finish(error);
    };
    const onClose = () => onError(new Error('the request was aborted before its body was complete'));
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onError);
    payload.on('close', onClose);
  };
}

/** The documented answer of each request Node refuses before routing ({@link jsonClientErrorHandler}). */
function clientErrorBody(kind: ClientErrorKind, error: NodeJS.ErrnoException) {
  const body =
    kind === 'timeout'
      ? receiverErrorBody('REQUEST_TIMEOUT')
      : kind === 'headers_too_large'
        ? receiverErrorBody('HEADERS_TOO_LARGE')
        : receiverErrorBody('BAD_REQUEST', `the request could not be parsed as HTTP/1.1 (${error.code})`);
  return { status: body.statusCode, body };
}

/**
 * The receiver's code of each refusal of a request's body or content type (as the shop API's
 * are: shared/request-errors.ts). Its own parser never refuses a body that is not JSON (an
 * authentic one is queued as received), so `body_not_json` comes only from elsewhere.
 */
const REQUEST_ERROR_CODES: Record<RequestErrorKind, ReceiverErrorCode> = {
  body_not_json: 'BAD_REQUEST',
  payload_too_large: 'PAYLOAD_TOO_LARGE',
  unsupported_media_type: 'UNSUPPORTED_MEDIA_TYPE',
  bad_request: 'BAD_REQUEST',
};

function validateOptions(options: ReceiverAppOptions): void {
  if (options.upstreams.length === 0)
    throw new TypeError('buildReceiverApp: upstreams must list at least one');
  for (const { name, secrets } of options.upstreams) {
    if (secrets.length === 0 || secrets.some((s) => s === '')) {
      throw new TypeError(
        `buildReceiverApp: upstream "${name}": secrets must list at least one non-empty webhook secret`,
      );
    }
  }
  if (new Set(options.upstreams.map((u) => u.name)).size !== options.upstreams.length) {
    throw new TypeError('buildReceiverApp: an upstream is listed twice');
  }
  if (options.path !== undefined && !options.path.startsWith('/')) {
    throw new TypeError(`buildReceiverApp: path must start with / (got "${options.path}")`);
  }
}

/** Where an upstream's webhooks are POSTed: the default upstream's at `path`, another's at `path/<name>`. */
export function upstreamWebhookPath(path: string, upstream: string): string {
  return isDefaultUpstream(upstream) ? path : `${path.replace(/\/+$/, '')}/${upstream}`;
}

/**
 * Builds the webhook receiver (docs/receiver.md) without listening: `POST <path>` (and
 * `POST <path>/<upstream>` for every other upstream: docs/upstreams.md) verifies the
 * signature over the raw bytes, then queues the event and answers 200 only once Redis has it;
 * `GET /healthz`, `GET /readyz`. Its metrics (`options.metrics`) are served elsewhere, never on
 * the internet-facing port ({@link startReceiverMetricsServer}). Throws a TypeError for invalid
 * options.
 */
export async function buildReceiverApp(options: ReceiverAppOptions): Promise<FastifyInstance> {
  validateOptions(options);
  const path = options.path ?? DEFAULT_WEBHOOK_PATH;
  const bodyLimit = options.bodyLimit ?? DEFAULT_WEBHOOK_BODY_LIMIT;
  const toleranceS = options.toleranceS ?? DEFAULT_TOLERANCE_S;
  const names: WebhookHeaderNames = {
    timestamp: (options.headers?.timestamp ?? WEBHOOK_HEADERS.timestamp).toLowerCase(),
    signature: (options.headers?.signature ?? WEBHOOK_HEADERS.signature).toLowerCase(),
    eventId: (options.headers?.eventId ?? WEBHOOK_HEADERS.eventId).toLowerCase(),
    eventType: (options.headers?.eventType ?? WEBHOOK_HEADERS.eventType).toLowerCase(),
  };
  const routes = options.upstreams.map((upstream) => ({
    upstream: upstream.name,
    secrets: [...upstream.secrets],
    url: upstreamWebhookPath(path, upstream.name),
  }));
  const webhookUrls = new Set(routes.map((route) => route.url));
  const { producer } = options;
  const metrics = options.metrics ?? createReceiverMetrics(producer);
  const limits: ReceiverLimits = { ...DEFAULT_RECEIVER_LIMITS, ...options.limits };

  const loggerInstance: FastifyBaseLogger | undefined = options.logger;
  const app = Fastify({
    ...(loggerInstance ? { loggerInstance } : { logger: false }),
    requestTimeout: limits.requestTimeoutMs,
    connectionTimeout: limits.idleTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    http: {
      headersTimeout: limits.headersTimeoutMs,
      // Node checks the two time-outs above on this interval (30 s by default).
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
      // A request without a Host header reaches the route's error answer, not Node's empty 400.
      requireHostHeader: false,
    },
    clientErrorHandler: jsonClientErrorHandler(clientErrorBody, options.logger),
    // Requests the router refuses (a malformed URL) get the documented answer too.
    frameworkErrors: (error, _request, reply) => {
      const body = receiverErrorBody('BAD_REQUEST', `the request URL is malformed (${error.code})`);
      void (reply as FastifyReply).code(body.statusCode).send(body);
    },
    // No per-request lines: the route logs refusals and failures itself, without headers.
    logController: new LogController({ disableRequestLogging: true }),
    // No child logger per request either (pino's child() is a measurable share of a webhook's
    // cost): the few lines logged on a request name its id themselves.
    childLoggerFactory: (logger) => logger,
    bodyLimit,
    // Requests already on open connections while closing are still served: Redis closes after.
    return503OnClosing: false,
  });

  app.server.maxConnections = limits.maxConnections;

  // HTTP/1.1 requires a Host header (RFC 9112 §3.2); Node's own check would answer an empty 400.
  app.addHook('onRequest', async (request) => {
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      throw new ReceiverHttpError('BAD_REQUEST', 'the request has no Host header, which HTTP/1.1 requires');
    }
  });

  await app.register(fastifyRawBody, { field: 'rawBody', global: false, encoding: false, runFirst: true });
  // Only the JSON types have a parser: text/plain and the rest become 415.
  app.removeAllContentTypeParsers();
  const handOver = rawBodyHandOver(bodyLimit);
  for (const contentType of JSON_CONTENT_TYPES) app.addContentTypeParser(contentType, handOver);

  // Node closes only the connections that are idle when close() begins; one busy then would
  // stay open (keep-alive) after its answer and hold the drain up. Answers sent while draining
  // therefore close their connection.
  let draining = false;
  app.addHook('preClose', (done) => {
    draining = true;
    done();
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (draining) reply.header('connection', 'close');
    done(null, payload);
  });

  const isWebhookRoute = (request: FastifyRequest) =>
    request.method === 'POST' && webhookUrls.has(request.routeOptions.url ?? '');

  app.setErrorHandler((error: FastifyError | ReceiverHttpError | QueueUnavailableError, request, reply) => {
    let code: ReceiverErrorCode;
    let detail: string | undefined;
    const refused = requestErrorOf(error, bodyLimit);
    if (error instanceof ReceiverHttpError) {
      code = error.code;
      detail = error.body.error;
    } else if (error instanceof QueueUnavailableError) {
      code = 'QUEUE_UNAVAILABLE';
      request.log.error({ reqId: request.id, err: error }, 'webhook not queued: Redis unavailable');
    } else if (refused) {
      code = REQUEST_ERROR_CODES[refused.kind];
      detail = refused.detail;
    } else {
      code = 'INTERNAL_ERROR';
      request.log.error({ reqId: request.id, err: error }, 'receiver failure');
    }
    if (isWebhookRoute(request)) {
      metrics.countRequest(code.toLowerCase() as WebhookOutcome);
      if (code !== 'QUEUE_UNAVAILABLE' && code !== 'INTERNAL_ERROR') {
        request.log.warn(
          { reqId: request.id, code, eventId: headerValue(request.headers[names.eventId]) },
          'webhook refused',
        );
      }
    }
    const body = receiverErrorBody(code, detail);
    return reply.code(body.statusCode).send(body);
  });

  app.setNotFoundHandler(async (request) => {
    throw new ReceiverHttpError(
      'NOT_FOUND',
      // The upstreams' names stay off the internet-facing port: the path's form only.
      `no route ${request.method} ${request.url}; webhooks are POSTed to ${path}${routes.length > 1 ? ` or ${upstreamWebhookPath(path, '<upstream>')}` : ''}`,
    );
  });

  /** A stale but authentic event: its order is polled early (decisions.md, "Webhooks"). */
  async function requestEarlyPoll(rawBody: Buffer, request: FastifyRequest, upstream: string): Promise<void> {
    const parsed = parseWebhookBody(rawBody);
    const found = parsed.ok ? findOrderInWebhook(parsed.body) : null;
    if (!found) {
      request.log.warn(
        { reqId: request.id },
        'stale webhook names no recognisable order; no early poll requested',
      );
      return;
    }
    try {
      const { jobId } = await producer.requestPoll({
        ...(found.partnerRef ? { partnerRef: found.partnerRef } : {}),
        ...(found.invoiceNumber ? { invoiceNumber: found.invoiceNumber } : {}),
        reason: 'stale_webhook',
        ...(isDefaultUpstream(upstream) ? {} : { upstream }),
      });
      request.log.info({ reqId: request.id, jobId }, 'stale but authentic webhook: early poll requested');
    } catch (error) {
      // Still a 401: the sender retries with a fresh timestamp, and reconciliation polls anyway.
      request.log.error({ reqId: request.id, err: error }, 'stale webhook: early poll request not queued');
    }
  }

  // One route per upstream, each verifying with that upstream's secrets only (docs/upstreams.md).
  for (const { upstream, secrets, url } of routes)
    app.post(url, { config: { rawBody: true }, bodyLimit }, async (request, reply) => {
      const started = performance.now();
      const rawBody = request.rawBody;
      if (!Buffer.isBuffer(rawBody)) {
        // Without a content type Fastify reads no body at all.
        throw new ReceiverHttpError(
          request.headers['content-type'] ? 'BODY_UNREADABLE' : 'UNSUPPORTED_MEDIA_TYPE',
        );
      }
      const headers = request.headers;
      const verdict = verifyWebhookSignature({
        rawBody,
        timestamp: headerValue(headers[names.timestamp]),
        signature: headerValue(headers[names.signature]),
        secrets,
        toleranceS,
      });
      if (!verdict.ok) {
        if (verdict.authentic) await requestEarlyPoll(rawBody, request, upstream);
        throw new ReceiverHttpError(verdict.code, verdict.message);
      }
      const headerEventId = headerValue(headers[names.eventId]) ?? null;
      const eventType = headerValue(headers[names.eventType]);
      const { jobId, duplicate, eventId, eventIdMismatch } = await producer.enqueueWebhook({
        rawBody,
        headerEventId,
        timestamp: verdict.timestamp,
        ...(eventType === undefined ? {} : { eventType }),
        upstream,
      });
      metrics.observeEnqueue((performance.now() - started) / 1000);
      metrics.countRequest(duplicate ? 'duplicate' : 'accepted');
      if (eventIdMismatch) {
        // The header is not signed: the body's id was used. A proxy rewriting the header, or
        // someone replaying a captured delivery under fresh ids, shows here.
        metrics.countEventIdMismatch();
        request.log.warn(
          { reqId: request.id, eventId, headerEventId, jobId, duplicate },
          'webhook event id header differs from the signed body: deduplicated on the body',
        );
      }
      request.log.debug({ reqId: request.id, eventId, jobId, duplicate }, 'webhook queued');
      return reply.type('application/json').send(duplicate ? DUPLICATE_BODY : ACCEPTED_BODY);
    });

  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (request, reply) => {
    try {
      await producer.ready();
      return { status: 'ready' };
    } catch (error) {
      request.log.warn({ reqId: request.id, err: error }, 'not ready: Redis unavailable');
      const why = error instanceof QueueUnavailableError ? error.message : 'Redis does not answer';
      return reply.code(503).send(receiverErrorBody('QUEUE_UNAVAILABLE', `not ready: ${why}`));
    }
  });

  return app;
}
