/**
 * The logger's levels, formats and their defaults, in a module that imports nothing: the config
 * schema and the CLI's option definitions name them without loading pino.
 */

/** The levels a logger can be set to; `silent` logs nothing. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** Default of `LoggerOptions.level`. */
export const DEFAULT_LOG_LEVEL: LogLevel = 'info';

/**
 * How log lines are written: `json` (one object a line, for pm2, files and collectors), `pretty`
 * (pino-pretty: coloured, one readable line a record, for a person) or `auto`: pretty when the
 * destination is a terminal, JSON otherwise.
 */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];
/** Default of `LoggerOptions.format`. */
export const DEFAULT_LOG_FORMAT: LogFormat = 'auto';
