import { type Logger, pino } from 'pino';

/**
 * Paths pino censors in every log line: the API key and secrets wherever they could appear
 * (request headers, config objects, error details). Hyphenated header names need brackets.
 */
export const REDACT_PATHS = [
  'apiKey',
  '*.apiKey',
  'secrets',
  '*.secrets',
  'H2H_API_KEY',
  'H2H_API_SECRET',
  '*.H2H_API_KEY',
  '*.H2H_API_SECRET',
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers["x-signature"]',
  'headers.authorization',
  'headers["x-api-key"]',
  'headers["x-signature"]',
];

/** The levels a logger can be set to; `silent` logs nothing. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** Default of {@link LoggerOptions.level}. */
export const DEFAULT_LOG_LEVEL: LogLevel = 'info';

export interface LoggerOptions {
  /** Default: {@link DEFAULT_LOG_LEVEL}. */
  level?: string;
  /** The component name in every line (`receiver`, `worker`, …). */
  name?: string;
  /** Where lines go. Default: stdout. */
  destination?: pino.DestinationStream;
  /**
   * Further request header names to censor, in lower case: a signature header renamed by a
   * setting, for example. Default: none besides {@link REDACT_PATHS}.
   */
  redactHeaders?: readonly string[];
}

/** The redact paths of one header name, under a request and on its own. */
function headerPaths(name: string): string[] {
  const key = JSON.stringify(name.toLowerCase());
  return [`req.headers[${key}]`, `headers[${key}]`];
}

/** The structured JSON logger every component uses, with secrets redacted. */
export function createLogger(options: LoggerOptions = {}): Logger {
  return pino(
    {
      level: options.level ?? DEFAULT_LOG_LEVEL,
      name: options.name,
      redact: {
        paths: [...new Set([...REDACT_PATHS, ...(options.redactHeaders ?? []).flatMap(headerPaths)])],
        censor: '[redacted]',
      },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination,
  );
}
