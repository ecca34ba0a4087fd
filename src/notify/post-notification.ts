import { type Dispatcher, getGlobalDispatcher } from 'undici';

/** Default time a delivery may take, connection, answer headers and body together. */
export const DEFAULT_NOTIFY_TIMEOUT_MS = 15_000;

/** The most of an answer's body read (and dropped) before the connection is given up instead. */
const MAX_ANSWER_BYTES = 65_536;

/** What one POST to an endpoint came to. */
export interface PostResult {
  /** The answer's HTTP status; null when none came in time. */
  status: number | null;
  durationMs: number;
  /** Why no answer came (time-out, refused, reset); null when one did. */
  error: string | null;
}

/**
 * POSTs `body` to `url` with `headers` and reads the answer, all within `timeoutMs`. Never throws:
 * a failure to get an answer is a result with its reason. The answer body is read and dropped
 * (up to 64 KiB; past that the connection is closed instead of reused).
 *
 * Through undici's `dispatch` with a handler of its own rather than `request`: a delivery needs
 * only the status, and `request`'s body stream and `AbortSignal.timeout` took about 80 µs of CPU
 * per POST more (55 against 135 µs, measured side by side), at 500 deliveries a second several
 * percent of the worker. The time-out is one timer that aborts the request.
 */
export function postNotification(
  url: string,
  headers: Record<string, string>,
  body: string,
  { timeoutMs, dispatcher = getGlobalDispatcher() }: { timeoutMs: number; dispatcher?: Dispatcher },
): Promise<PostResult> {
  const started = performance.now();
  return new Promise<PostResult>((resolve) => {
    let status: number | null = null;
    let controller: Dispatcher.DispatchController | undefined;
    let received = 0;
    let done = false;
    const finish = (error: string | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({
        status,
        durationMs: Math.round(performance.now() - started),
        error: status === null ? error : null,
      });
    };
    const timedOut = () => new NotifyTimeoutError(`no answer within ${timeoutMs} ms (H2H_NOTIFY_TIMEOUT_MS)`);
    const timer = setTimeout(() => {
      // Still connecting: the request is aborted as soon as it starts (the connection attempt
      // itself is bounded by the agent's connect time-out). An answer that came and whose body
      // did not finish in time keeps its status (finish drops the error then).
      const error = timedOut();
      controller?.abort(error);
      finish(error.message);
    }, timeoutMs);
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(started) {
        controller = started;
        if (done) started.abort(timedOut());
      },
      onResponseStart(_controller, statusCode) {
        // 1xx answers are interim: the final status follows.
        if (statusCode >= 200) status = statusCode;
      },
      onResponseData(current, chunk) {
        received += chunk.length;
        if (received > MAX_ANSWER_BYTES) {
          current.abort(new Error(`the answer's body is over ${MAX_ANSWER_BYTES} bytes`));
          finish(null);
        }
      },
      onResponseEnd() {
        finish(null);
      },
      onResponseError(_controller, err) {
        const e = err as Error & { code?: string; cause?: { code?: string; message?: string } };
        finish(
          e instanceof NotifyTimeoutError
            ? e.message
            : `${e.cause?.code ?? e.code ?? e.name}: ${e.cause?.message ?? e.message}`,
        );
      },
    };
    try {
      const { origin, pathname, search } = new URL(url);
      dispatcher.dispatch(
        {
          origin,
          path: `${pathname}${search}`,
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body,
          // Past our own time-out, so that it is the one that ends a slow answer.
          headersTimeout: timeoutMs + 1_000,
          bodyTimeout: timeoutMs + 1_000,
        },
        handler,
      );
    } catch (err) {
      handler.onResponseError?.(undefined as never, err as Error);
    }
  });
}

class NotifyTimeoutError extends Error {
  override name = 'NotifyTimeoutError';
}
