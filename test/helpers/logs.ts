import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { createLogger, type LoggerOptions } from '../../src/observability/logger.js';

/** A real pino logger (the project's own, redaction included) whose lines the test can read. */
export interface CapturedLogger {
  logger: Logger;
  /** Every line written so far, as written. */
  lines: string[];
  /** Every line written so far, parsed. */
  records(): Array<Record<string, unknown>>;
}

/** Captures what {@link createLogger} writes; `options` as createLogger's (name, level, redactHeaders). */
export function capturedLogger(options: Omit<LoggerOptions, 'destination'>): CapturedLogger {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return {
    logger: createLogger({ ...options, destination }),
    lines,
    records: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}
