/**
 * Defaults more than one component applies, in a module that imports nothing: the config schema
 * names them without loading the components.
 */

/**
 * Default longest graceful stop, ms: of the receiver and the shop API (H2H_SHUTDOWN_TIMEOUT_MS),
 * of the worker and its components (H2H_WORKER_SHUTDOWN_TIMEOUT_MS), and of `h2h-sync sim`;
 * close-with-grace's own default too.
 */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 10_000;
