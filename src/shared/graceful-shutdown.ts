/**
 * The one shutdown path of the long-running processes (receiver, worker), on close-with-grace:
 * the library fastify/demo uses for the same job. It also covers what the hand-written signal
 * handlers did not: a second signal during the drain, an uncaught exception or unhandled
 * rejection, and the other signals that ask a process to stop (SIGHUP, SIGQUIT, SIGUSR2).
 */
import closeWithGrace from 'close-with-grace';
import type { Logger } from 'pino';

/**
 * Signals of a hardware fault or a debugger trap. Node's docs: a JS listener on a real SIGSEGV,
 * SIGBUS, SIGFPE or SIGILL "might cause the process to stop responding", and a hung process is
 * never restarted; so they keep their default (the process dies and pm2 restarts it).
 */
const FAULT_SIGNALS = ['SIGILL', 'SIGTRAP', 'SIGABRT', 'SIGBUS', 'SIGFPE', 'SIGSEGV'] as const;

/** Options of {@link exitGracefully}. */
export interface GracefulShutdownOptions {
  /** The process in log lines: `receiver`, `worker`. */
  name: string;
  logger: Logger;
  /** Longest wait for `close`; after it the process exits 1 anyway. Required. */
  timeoutMs: number;
  /**
   * Stops the process's components. Resolves `false` when one had to be abandoned (the process
   * then exits 1), anything else when all stopped gracefully.
   */
  close: () => Promise<boolean | undefined>;
}

/**
 * Installs the process's shutdown: on SIGINT (what pm2 stop and reload send), SIGTERM, SIGHUP,
 * SIGQUIT or SIGUSR2 it logs, runs `close` once and exits 0, or 1 when `close` reports an
 * abandoned component, rejects, or outlasts `timeoutMs`. A second signal meanwhile exits 1 at
 * once. An uncaught exception or unhandled rejection is logged and takes the same path, and the
 * process exits 1 even when the drain succeeds: work in flight still finishes (events already
 * accepted reach Redis, a worker's batch commits and its jobs go back to the queue instead of
 * waiting for stall recovery), bounded by the same timeout.
 */
export function exitGracefully(options: GracefulShutdownOptions): { uninstall(): void } {
  const { name, logger, timeoutMs } = options;
  return closeWithGrace(
    {
      delay: timeoutMs,
      skip: [...FAULT_SIGNALS],
      // Gets what the close threw (an Error), or a line of the library's own.
      logger: {
        error: (problem: unknown) =>
          typeof problem === 'string'
            ? logger.error(problem)
            : logger.error({ err: problem }, `${name} did not stop cleanly; exiting 1`),
      },
      onTimeout: () => logger.error({ timeoutMs }, `${name} stop timed out; exiting anyway`),
      onSecondSignal: (signal) =>
        logger.error({ signal }, `${name}: second ${signal} while stopping; exiting now`),
      onSecondError: (error) =>
        logger.fatal({ err: error }, `${name}: another uncaught error while stopping; exiting now`),
    },
    async ({ signal, err }) => {
      if (err) logger.fatal({ err }, `${name}: uncaught error; stopping, then exiting 1`);
      else logger.info({ signal }, `${name} stopping`);
      if ((await options.close()) === false) {
        throw new Error(`${name} stopped, but a component had to be abandoned (see above)`);
      }
    },
  );
}
