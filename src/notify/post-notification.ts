import { type Dispatcher, getGlobalDispatcher, request } from 'undici';

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
 * a failure to get an answer is a result with its reason. An answer counts by its status; its
 * body is read and dropped (up to 64 KiB; past that the connection is closed instead of reused),
 * and a body that does not finish in time does not take the status back.
 */
export async function postNotification(
  url: string,
  headers: Record<string, string>,
  body: string,
  { timeoutMs, dispatcher = getGlobalDispatcher() }: { timeoutMs: number; dispatcher?: Dispatcher },
): Promise<PostResult> {
  const started = performance.now();
  const durationMs = () => Math.round(performance.now() - started);
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const answer = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
      dispatcher,
      signal,
    });
    await answer.body.dump({ limit: MAX_ANSWER_BYTES, signal }).catch(() => {});
    return { status: answer.statusCode, durationMs: durationMs(), error: null };
  } catch (err) {
    const e = err as Error & { code?: string; cause?: { code?: string; message?: string } };
    const error = signal.aborted
      ? `no answer within ${timeoutMs} ms (H2H_NOTIFY_TIMEOUT_MS)`
      : `${e.cause?.code ?? e.code ?? e.name}: ${e.cause?.message ?? e.message}`;
    return { status: null, durationMs: durationMs(), error };
  }
}
