/**
 * The notifier's defaults, in a module that imports nothing: the config schema names them without
 * loading the notifier and its HTTP client (undici), which a CLI command that reads the settings
 * never needs.
 */

/** Default time a delivery may take, connection, answer headers and body together (`NotifierOptions.timeoutMs`). */
export const DEFAULT_NOTIFY_TIMEOUT_MS = 15_000;
/** Default of `NotifierOptions.concurrency`. */
export const DEFAULT_NOTIFY_CONCURRENCY = 20;
/** Default of `NotifierOptions.dispatchEveryMs`. */
export const DEFAULT_NOTIFY_DISPATCH_EVERY_MS = 250;
