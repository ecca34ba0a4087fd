import { createRequire } from 'node:module';
import { type Logger, pino } from 'pino';
import type PinoPretty from 'pino-pretty';
import { WEBHOOK_HEADERS } from '../upstream/model.js';
import { DEFAULT_LOG_FORMAT, DEFAULT_LOG_LEVEL, type LogFormat } from './defaults.js';

/**
 * Request headers that carry a credential: the upstream API key, the webhook signature (its
 * default name; a renamed one is passed as {@link LoggerOptions.redactHeaders}), the admin
 * server's basic auth, and anything a browser or proxy sends to authenticate.
 */
export const CREDENTIAL_HEADERS = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
  WEBHOOK_HEADERS.signature,
] as const;

/** The redact paths of one header name, under a request, a response and on its own. */
function headerPaths(name: string): string[] {
  const key = JSON.stringify(name.toLowerCase());
  return [`req.headers[${key}]`, `res.headers[${key}]`, `headers[${key}]`, `*.headers[${key}]`];
}

/**
 * Paths pino censors in every log line, at every level: the API key and secrets wherever they
 * could appear (config objects, error details), every credential header, and the raw bytes Node
 * hangs on an HTTP parse error (`rawPacket`: the request as received, headers and all).
 * Hyphenated names need brackets.
 */
export const REDACT_PATHS = [
  'apiKey',
  '*.apiKey',
  'secrets',
  '*.secrets',
  'password',
  '*.password',
  'H2H_API_KEY',
  'H2H_API_SECRET',
  'ADMIN_PASSWORD',
  '*.H2H_API_KEY',
  '*.H2H_API_SECRET',
  '*.ADMIN_PASSWORD',
  // Every upstream account's (docs/upstreams.md), wherever the list is logged.
  'upstreams[*].apiKey',
  'upstreams[*].secrets',
  '*.upstreams[*].apiKey',
  '*.upstreams[*].secrets',
  '*.*.upstreams[*].apiKey',
  '*.*.upstreams[*].secrets',
  'rawPacket',
  '*.rawPacket',
  ...CREDENTIAL_HEADERS.flatMap(headerPaths),
];

/**
 * pino's error serializer, without the raw bytes of a parse error anywhere in the cause chain:
 * redact paths cannot reach every depth, a serializer can.
 */
function errorWithoutRawPacket(error: unknown): unknown {
  const serialized = pino.stdSerializers.err(error as Error) as unknown as Record<string, unknown>;
  const strip = (value: unknown, depth: number): void => {
    if (typeof value !== 'object' || value === null || depth > 8) return;
    const record = value as Record<string, unknown>;
    if ('rawPacket' in record) record.rawPacket = '[redacted]';
    strip(record.cause, depth + 1);
    if (Array.isArray(record.aggregateErrors))
      for (const inner of record.aggregateErrors) strip(inner, depth + 1);
  };
  strip(serialized, 0);
  return serialized;
}

/** pino-pretty, loaded only for pretty lines: a process that logs JSON (any under pm2) never loads it. */
const loadPinoPretty = (): typeof PinoPretty => createRequire(import.meta.url)('pino-pretty');

/** Whether `format` means pretty lines on `destination` (`auto`: when it is a terminal). */
export function prettyLogs(format: LogFormat, destination: { isTTY?: boolean } | undefined): boolean {
  if (format === 'auto') return destination?.isTTY === true;
  return format === 'pretty';
}

export interface LoggerOptions {
  /** Default: {@link DEFAULT_LOG_LEVEL}. */
  level?: string;
  /** The component name in every line (`receiver`, `worker`, …). */
  name?: string;
  /** Where lines go. Default: stdout. */
  destination?: pino.DestinationStream;
  /** Default: {@link DEFAULT_LOG_FORMAT}. */
  format?: LogFormat;
  /**
   * Further request header names to censor, in lower case: a signature header renamed by a
   * setting, for example. Default: none besides {@link REDACT_PATHS}.
   */
  redactHeaders?: readonly string[];
}

/**
 * The structured logger every component uses, with secrets redacted: JSON lines, or pretty ones
 * (see {@link LogFormat}). Redaction and serializers run before pino-pretty sees a record, so
 * pretty lines are censored exactly as JSON ones.
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const { destination } = options;
  // pino's default destination is stdout (fd 1; pino writes it asynchronously and flushes at exit).
  const target = (destination ?? process.stdout) as { isTTY?: boolean };
  const pretty = prettyLogs(options.format ?? DEFAULT_LOG_FORMAT, target);
  return pino(
    {
      level: options.level ?? DEFAULT_LOG_LEVEL,
      name: options.name,
      redact: {
        paths: [...new Set([...REDACT_PATHS, ...(options.redactHeaders ?? []).flatMap(headerPaths)])],
        censor: '[redacted]',
      },
      serializers: { err: errorWithoutRawPacket },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pretty
      ? loadPinoPretty()({
          ...(destination ? { destination } : {}),
          colorize: target.isTTY === true,
          translateTime: 'SYS:HH:MM:ss.l',
          ignore: 'pid,hostname',
        })
      : destination,
  );
}
